from django.conf import settings

from experiments.models import Membership


def current_team(request) -> dict:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {
        "current_team": getattr(request, "team", None),
        "current_membership": getattr(request, "membership", None),
        "user_memberships": Membership.objects.filter(user=user).select_related("team").order_by("team__name"),
    }


def single_sign_on(request) -> dict:
    """The login page's "Sign in with …" button, when single sign-on is on."""
    return {"sso_provider": settings.SSO_PROVIDER_NAME if settings.SSO_ENABLED else ""}
