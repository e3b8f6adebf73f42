"""Every page works inside the user's current team, kept in the session and switchable."""

from experiments.models import Membership

SESSION_KEY = "current_team_id"


class CurrentTeamMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request.membership = None
        request.team = None
        if request.user.is_authenticated:
            memberships = Membership.objects.filter(user=request.user).select_related("team")
            wanted = request.session.get(SESSION_KEY)
            chosen = None
            if wanted is not None:
                chosen = memberships.filter(team_id=wanted).first()
            if chosen is None:
                chosen = memberships.order_by("team__name").first()
            if chosen is not None:
                request.membership = chosen
                request.team = chosen.team
        return self.get_response(request)
