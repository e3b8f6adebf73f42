"""Links and answers shared by the API's resources."""

from rest_framework import status
from rest_framework.response import Response


def absolute(context, path: str) -> str:
    """The path as a full URL when the serializer has a request to build it from."""
    request = context.get("request")
    return request.build_absolute_uri(path) if request is not None else path


def accepted(data: dict, url: str | None = None) -> Response:
    """202: the work is queued; `url` (else the object's own) is where to follow it."""
    return Response({"url": url or data["url"], **data}, status=status.HTTP_202_ACCEPTED)
