"""Every page works inside the user's current team, kept in the session and switchable."""

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent
from django.http import HttpResponse, JsonResponse, QueryDict

from experiments.selectors.teams import membership_current
from experiments.services.audit import audit_acting_request
from experiments.tuning.bounds import parse_id

SESSION_KEY = "current_team_id"


class CurrentTeamMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request.membership = None
        request.team = None
        if request.user.is_authenticated:
            chosen = membership_current(user=request.user, team_id=request.session.get(SESSION_KEY))
            if chosen is not None:
                request.membership = chosen
                request.team = chosen.team
        return self.get_response(request)


class AuditContextMiddleware:
    """The audit log reads who acts, and from where, off the request being handled."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        with audit_acting_request(request):
            return self.get_response(request)


NUL_MESSAGE = "The request holds a NUL character (\\x00), which no field accepts; remove it and try again."
TOO_MANY_FIELDS = "The request has too many fields (at most {limit:,}); send fewer."


def _refuse(request, message: str, status: int):
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": message, "field": None, "errors": {}}, status=status)
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")


def body_limit(content_type: str) -> int:
    """Bytes a request body may have: an upload's file limit (and room for its fields) for
    multipart, else Django's limit on bodies read into memory."""
    if content_type == "multipart/form-data":
        return (settings.UPLOAD_MAX_MB + 1) * 1024 * 1024
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


class RequestChecksMiddleware:
    """What no view should have to handle, refused before a view runs with a message and no
    logged traceback (Django would log a 400 from deep inside as a security error):
    - a body over its limit (413), by its Content-Length, before anything reads it;
    - a form with more fields than DATA_UPLOAD_MAX_NUMBER_FIELDS (400);
    - a NUL in any query or form value (400): no text column of PostgreSQL can hold one."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        limit = body_limit(request.content_type)
        length = parse_id(request.META.get("CONTENT_LENGTH")) or 0
        if length > limit:
            return _refuse(request, f"The request body is {length / 1e6:,.1f} MB; at most {limit / 1e6:,.1f} MB "
                                    "are accepted here.", 413)
        try:
            values = [*request.GET.lists()]
            if request.method == "POST" and request.content_type in ("application/x-www-form-urlencoded",
                                                                     "multipart/form-data"):
                values += [*request.POST.lists()]
            elif request.content_type == "application/x-www-form-urlencoded" and length:
                # PATCH and PUT forms: Django leaves them to the view (DRF parses them), so count here.
                values += [*QueryDict(request.body, encoding=request.encoding).lists()]
        except TooManyFieldsSent:
            return _refuse(request, TOO_MANY_FIELDS.format(limit=settings.DATA_UPLOAD_MAX_NUMBER_FIELDS), 400)
        except RequestDataTooBig:  # a chunked body, with no Content-Length to check first
            return _refuse(request, f"The request body is larger than {limit / 1e6:,.1f} MB.", 413)
        if any("\x00" in key or any("\x00" in value for value in items) for key, items in values):
            return _refuse(request, NUL_MESSAGE, 400)
        return self.get_response(request)
