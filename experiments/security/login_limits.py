"""Login rate limiting on django-axes, counted in the database so every web process shares it, and shared with
the password-change form so a stolen session cannot guess a new password."""

import ipaddress
import math

from axes.backends import AxesStandaloneBackend
from axes.handlers.proxy import AxesProxyHandler
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm, PasswordChangeForm
from django.contrib.auth.signals import user_login_failed
from django.core.exceptions import ValidationError
from django.shortcuts import render

LOCKED_TEMPLATE = "registration/login.html"


class LoginLimitBackend(AxesStandaloneBackend):
    """Refuses a login while its username + address pair is locked out, and authenticates no one itself."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


def _address(raw: str) -> str | None:
    try:
        return str(ipaddress.ip_address(raw.strip()))
    except ValueError:
        return None


def client_ip(request) -> str | None:
    """The client's address. X-Forwarded-For is read only when TRUSTED_PROXY_COUNT proxies are
    configured: each of them appends the address it received the request from, so the client is
    the entry that many places from the right; anything left of it may be forged by the client."""
    remote = request.META.get("REMOTE_ADDR")
    proxies = settings.TRUSTED_PROXY_COUNT
    if proxies:
        hops = [hop for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
        if len(hops) >= proxies:
            return _address(hops[-proxies]) or remote
    return remote


def lockout_minutes() -> int:
    return max(1, math.ceil(settings.AXES_COOLOFF_TIME.total_seconds() / 60))


def locked_message() -> str:
    minutes = lockout_minutes()
    return f"Too many failed attempts; try again in {minutes} minute{'s' if minutes != 1 else ''}."


class LimitedPasswordChangeForm(PasswordChangeForm):
    """Django's form, with the current password checked under the login attempt limit."""

    def __init__(self, user, *args, request, **kwargs):
        super().__init__(user, *args, **kwargs)
        self.request = request

    def clean_old_password(self):
        credentials = {"username": self.user.get_username()}
        if AxesProxyHandler.is_locked(self.request, credentials):
            raise ValidationError(locked_message(), code="locked")
        try:
            return super().clean_old_password()
        except ValidationError:
            user_login_failed.send(sender=__name__, credentials=credentials, request=self.request)
            raise


def locked_out(request, original_response=None, credentials=None):
    """The login page again (or the password-change page, where that was the attempt), saying how
    long to wait, with 429 Too Many Requests. Every attempt while locked out restarts the wait
    (axes' default), so the whole cool-off is left."""
    match = getattr(request, "resolver_match", None)
    if match is not None and match.url_name == "password_change" and request.user.is_authenticated:
        form = LimitedPasswordChangeForm(request.user, request=request)
        return render(request, "registration/password_change_form.html",
                      {"form": form, "locked_out": locked_message()}, status=429)
    username = (credentials or {}).get("username") or request.POST.get("username", "")
    form = AuthenticationForm(request, initial={"username": username})
    return render(request, LOCKED_TEMPLATE, {
        "form": form,
        "locked_out_minutes": lockout_minutes(),
        "next": request.POST.get("next", request.GET.get("next", "")),
    }, status=429)
