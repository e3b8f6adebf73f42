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
