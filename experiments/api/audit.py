"""The team's audit log (owners only)."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers

from experiments.api.auth import OwnerOnly
from experiments.api.bodies import FormError
from experiments.api.errors import ERRORS
from experiments.forms.audit import AuditFilterForm
from experiments.services.audit import VERB_LABELS


class AuditEventSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    timestamp = serializers.DateTimeField()
    actor = serializers.CharField(source="actor.get_username", allow_null=True, default=None,
                                  help_text="The username, or null for the system (a worker, beat).")
    action = serializers.CharField(source="verb", help_text='e.g. "membership.add", "study.cancel", '
                                                            '"model.download".')
    object_type = serializers.CharField(source="content_type.model")
    object_id = serializers.CharField(source="object_pk")
    object = serializers.CharField(source="object_repr")
    changes = serializers.JSONField(allow_null=True)
    address = serializers.IPAddressField(source="remote_addr", allow_null=True)


class AuditList(generics.GenericAPIView):
    """The team's audit log (owners only), newest first."""

    serializer_class = AuditEventSerializer
    permission_classes = [OwnerOnly]

    @extend_schema(parameters=[
        OpenApiParameter("actor", int, description="A user id."),
        OpenApiParameter("action", str, enum=sorted(VERB_LABELS)),
        OpenApiParameter("since", OpenApiTypes.DATE), OpenApiParameter("until", OpenApiTypes.DATE)],
        responses={200: AuditEventSerializer(many=True), **ERRORS})
    def get(self, request):
        params = {key: request.query_params[key] for key in AuditFilterForm.base_fields if key in request.query_params}
        form = AuditFilterForm(params, team=request.team)
        if not form.is_valid():
            raise FormError(form.errors)
        page = self.paginate_queryset(form.events(request.team))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)
