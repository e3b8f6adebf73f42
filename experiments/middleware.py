"""Every page works inside the user's current team, kept in the session and switchable."""

import io

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.core.files.uploadhandler import load_handler
from django.http import HttpResponse, JsonResponse, QueryDict
from django.http.multipartparser import MultiPartParser, MultiPartParserError
from django.template.loader import render_to_string

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
TOO_MANY_FILES = "The request has too many files (at most {limit:,}); send fewer."
NOT_MULTIPART = ("The request body is not a readable multipart form ({reason}); send it as multipart/form-data "
                 "with its boundary, as browsers and curl -F do.")
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def _refuse(request, message: str, status: int, field: str | None = None):
    """The API's JSON error under /api/; on pages, the message where the form's answer goes: a
    fragment for htmx (the "Try it" box swaps it in), else a page of its own."""
    if request.path.startswith("/api/"):
        # The shape of experiments/api/errors.py's bodies (not imported from there: DRF loads
        # experiments.api.auth, which imports this module, while api/errors.py is still loading).
        detail = f"{field.replace('_', ' ').capitalize()}: {message}" if field else message
        return JsonResponse({"detail": detail, "field": field, "errors": {field: [message]} if field else {}},
                            status=status)
    template = "_request_refused.html" if request.headers.get("HX-Request") == "true" else "request_refused.html"
    return HttpResponse(render_to_string(template, {"message": message}), status=status)


def body_limit(request) -> int:
    """Bytes a request body may have: an upload's file limit (and room for its fields) for a
    multipart POST (files come only by POST), else Django's limit on bodies read into memory."""
    if request.content_type == "multipart/form-data" and request.method == "POST":
        return (settings.UPLOAD_MAX_MB + 1) * 1024 * 1024
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def _form_values(request, length: int) -> list:
    """A form or multipart body's fields, parsed now whatever the method, so that what Django
    raises on a broken one (lazily, wherever request.POST or DRF's request.data is first read)
    is raised here, once, before any view."""
    if request.content_type not in FORM_TYPES or not (length or request.method == "POST"):
        return []
    if request.method == "POST":
        return [*request.POST.lists()]  # Django's own parse, which the view then reads
    # PUT, PATCH, DELETE: Django leaves them to the view (DRF parses them from request.body,
    # which reading keeps in memory, within DATA_UPLOAD_MAX_MEMORY_SIZE).
    if request.content_type == "application/x-www-form-urlencoded":
        return [*QueryDict(request.body, encoding=request.encoding).lists()]
    handlers = [load_handler(path, request) for path in settings.FILE_UPLOAD_HANDLERS]
    data, _files = MultiPartParser(request.META, io.BytesIO(request.body), handlers, request.encoding).parse()
    return [*data.lists()]


class RequestChecksMiddleware:
    """What no view should have to handle (oversized bodies, too many fields or files, NUL characters), refused before
    a view runs with a message and no logged traceback."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        limit = body_limit(request)
        length = parse_id(request.META.get("CONTENT_LENGTH")) or 0
        if length > limit:
            return _refuse(request, f"The request body is {length / 1e6:,.1f} MB; at most {limit / 1e6:,.1f} MB "
                                    "are accepted here.", 413)
        try:
            values = [*request.GET.lists(), *_form_values(request, length)]
        except TooManyFieldsSent:
            return _refuse(request, TOO_MANY_FIELDS.format(limit=settings.DATA_UPLOAD_MAX_NUMBER_FIELDS), 400)
        except TooManyFilesSent:
            return _refuse(request, TOO_MANY_FILES.format(limit=settings.DATA_UPLOAD_MAX_NUMBER_FILES), 400)
        except RequestDataTooBig:  # a form's fields over the limit, or a chunked body (no Content-Length)
            return _refuse(request, f"The request body's fields are larger than "
                                    f"{settings.DATA_UPLOAD_MAX_MEMORY_SIZE / 1e6:,.1f} MB; send less.", 413)
        except MultiPartParserError as exc:
            return _refuse(request, NOT_MULTIPART.format(reason=str(exc).rstrip(".")), 400)
        nul = [key for key, items in values if "\x00" in key or any("\x00" in v for v in items)]
        if nul:
            return _refuse(request, NUL_MESSAGE, 400, field=nul[0] if nul[0] and "\x00" not in nul[0] else None)
        return self.get_response(request)
