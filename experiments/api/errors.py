"""Every API error as {"detail", "field", "errors"}: one message a person can act on, the field it
is about (or null), and every field's messages."""

from django.core.exceptions import PermissionDenied
from django.http import Http404, JsonResponse
from django.views.defaults import page_not_found
from drf_spectacular.utils import OpenApiResponse
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from experiments.errors import TuneboardError
from experiments.tuning.bounds import non_ascii_digit

NON_FIELD = "non_field_errors"


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The object is not in a state that allows this."


def error_body(detail: str, field: str | None = None, errors: dict | None = None) -> dict:
    return {"detail": detail, "field": field, "errors": errors or {}}


def _flatten(value) -> list[str]:
    if isinstance(value, dict):
        return [m for v in value.values() for m in _flatten(v)]
    if isinstance(value, list | tuple):
        return [m for v in value for m in _flatten(v)]
    return [str(value)]


def validation_body(errors: dict) -> dict:
    """Form-style {field: [messages]} (Django's "__all__" is DRF's non_field_errors)."""
    errors = {NON_FIELD if k == "__all__" else k: _flatten(v) for k, v in errors.items()}
    field = next(iter(errors), None)
    if field is None:
        return error_body("The request is not valid.")
    first = errors[field][0] if errors[field] else "Not valid."
    if field == NON_FIELD:
        return error_body(first, None, errors)
    return error_body(f"{field.replace('_', ' ').capitalize()}: {first}", field, errors)


def not_found(request, exception=None):
    """Django's 404 for a path no route matches (webapp.urls.handler404): JSON under /api/, where
    an id in other digits than 0-9 ('/api/v1/studies/٣/') matches no route; the page elsewhere."""
    if not request.path.startswith("/api/"):
        return page_not_found(request, exception)
    detail = f"No API route matches {request.path}."
    if digit := non_ascii_digit(request.path):
        detail += f" Write ids with the digits 0-9, not {digit!r}."
    return JsonResponse(error_body(detail), status=404)


def exception_handler(exc, context):
    if isinstance(exc, TuneboardError):
        exc = exceptions.ValidationError({NON_FIELD: [str(exc)]})
    if isinstance(exc, Http404):
        exc = exceptions.NotFound("Not found (or not in your current team).")
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    data = response.data
    if isinstance(exc, exceptions.ValidationError):
        if isinstance(data, dict):
            body = validation_body(data)
        else:
            body = validation_body({NON_FIELD: data})
    else:
        detail = data.get("detail", "") if isinstance(data, dict) else " ".join(_flatten(data))
        body = error_body(str(detail))
    return Response(body, status=response.status_code, headers={k: v for k, v in response.items()})


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()
    field = serializers.CharField(allow_null=True)
    errors = serializers.DictField(child=serializers.ListField(child=serializers.CharField()))


# The error responses every endpoint may give, for the schema.
ERRORS = {code: OpenApiResponse(ErrorSerializer) for code in (400, 401, 403, 404)}


def invalid(field: str | None, message: str) -> exceptions.ValidationError:
    """A 400 about one field (None: about the request as a whole)."""
    return exceptions.ValidationError({field or NON_FIELD: [message]})
