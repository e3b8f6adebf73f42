"""Login rate limiting on top of django-axes: who the client is (behind trusted proxies only),
the lockout page, and the backend that refuses a locked-out username + address pair.

Axes counts failed logins per username and client address in the database
(settings.AXES_LOCKOUT_PARAMETERS), so every web process and pod shares the count."""

import ipaddress
import math

from axes.backends import AxesStandaloneBackend
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.shortcuts import render

LOCKED_TEMPLATE = "registration/login.html"


class LoginLimitBackend(AxesStandaloneBackend):
    """Refuses a login while its username + address pair is locked out; authenticates no one.

    authenticate() without a request comes from code inside this process (the test client, a
    shell), never from a client over the network, so there is no one to count: it is passed
    on to the next backend instead of raising as axes does."""

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


def locked_out(request, original_response=None, credentials=None):
    """The login page again, saying how long to wait, with 429 Too Many Requests. Every
    attempt while locked out restarts the wait (axes' default), so the whole cool-off is left."""
    username = (credentials or {}).get("username") or request.POST.get("username", "")
    form = AuthenticationForm(request, initial={"username": username})
    return render(request, LOCKED_TEMPLATE, {
        "form": form,
        "locked_out_minutes": lockout_minutes(),
        "next": request.POST.get("next", request.GET.get("next", "")),
    }, status=429)
