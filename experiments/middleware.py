"""Every page works inside the user's current team, kept in the session and switchable."""

from django.http import HttpResponseBadRequest, JsonResponse

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


NUL_MESSAGE = "The request holds a NUL character (\\x00), which no field accepts; remove it and try again."


class RefuseNulBytesMiddleware:
    """A NUL in any query or form value is refused with a 400 before a view runs: no text
    column of PostgreSQL can hold one, so it would otherwise end as a 500 deep in a query."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        values = [*request.GET.lists()]
        if request.method == "POST" and request.content_type in ("application/x-www-form-urlencoded",
                                                                 "multipart/form-data"):
            values += [*request.POST.lists()]
        if any("\x00" in key or any("\x00" in value for value in items) for key, items in values):
            if request.path.startswith("/api/"):
                return JsonResponse({"detail": NUL_MESSAGE, "field": None, "errors": {}}, status=400)
            return HttpResponseBadRequest(NUL_MESSAGE)
        return self.get_response(request)
