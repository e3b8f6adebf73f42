"""Password change and reset, with the limits that keep a stolen session or a stranger from
abusing them (experiments/security/login_limits.py, experiments/services/password_resets.py)."""

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.http import Http404, HttpResponseRedirect

from experiments.security.login_limits import LimitedPasswordChangeForm, client_ip
from experiments.services.password_resets import password_reset_allowed


class LimitedPasswordChangeView(auth_views.PasswordChangeView):
    form_class = LimitedPasswordChangeForm

    def get_form_kwargs(self):
        return {**super().get_form_kwargs(), "request": self.request}

    def form_invalid(self, form):
        response = super().form_invalid(form)
        if form.has_error("old_password", "locked"):
            response.status_code = 429
        return response


class ThrottledPasswordResetView(auth_views.PasswordResetView):
    def form_valid(self, form):
        if password_reset_allowed(email=form.cleaned_data["email"], client=client_ip(self.request)):
            return super().form_valid(form)
        # The same answer as a sent mail (as Django answers for an unknown address).
        return HttpResponseRedirect(self.get_success_url())


def sso_start(request):
    """Off the provider's login page and back (mozilla-django-oidc), only where single sign-on is on."""
    if not settings.SSO_ENABLED:
        raise Http404("Single sign-on is not set up here.")
    from mozilla_django_oidc.views import OIDCAuthenticationRequestView

    return OIDCAuthenticationRequestView.as_view()(request)


def sso_callback(request):
    if not settings.SSO_ENABLED:
        raise Http404("Single sign-on is not set up here.")
    from mozilla_django_oidc.views import OIDCAuthenticationCallbackView

    return OIDCAuthenticationCallbackView.as_view()(request)
