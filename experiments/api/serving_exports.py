"""Serving exports: request one (the "Export now" button's API) and read the team's serving
folder with its last export, or one export by id."""

from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers
from rest_framework.response import Response

from experiments.api.bodies import NoFields, body_object, strict
from experiments.api.errors import ERRORS
from experiments.api.responses import absolute, accepted
from experiments.models import ServingExport
from experiments.selectors.serving_exports import serving_status
from experiments.services.serving_exports import serving_export_request


class ServingExportSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    report = serializers.DictField(help_text="What it wrote, kept and removed (<name>/<version>), what it left out "
                                             "and why (`skipped`), the labels served per model, `config_changed`, "
                                             "`seconds`, and the folder and base path it wrote for.")

    class Meta:
        model = ServingExport
        fields = ["id", "url", "status", "reason", "error", "report", "worker_host", "created", "started", "finished",
                  "duration_seconds", "device_seconds", "device_kind"]

    def get_url(self, obj) -> str:
        return absolute(self.context, reverse("api:serving-export-detail", kwargs={"export_id": obj.id}))


class ServingStatusSerializer(serializers.Serializer):
    team_folder = serializers.CharField(help_text="The team's folder under the serving volume.")
    folder = serializers.CharField(help_text="Where the workers write it.")
    base_path = serializers.CharField(help_text="Where TF Serving sees it (models.config's base_path prefix).")
    model_config_file = serializers.CharField(help_text="TF Serving's --model_config_file for this team.")
    last = ServingExportSerializer(allow_null=True, help_text="The latest export (perhaps queued or running).")
    last_finished = ServingExportSerializer(allow_null=True,
                                            help_text="The latest export completed into the team's folder: "
                                                      "what it holds.")


class ServingExports(generics.GenericAPIView):
    serializer_class = ServingExportSerializer

    @extend_schema(operation_id="v1_serving_exports_status", responses={200: ServingStatusSerializer, **ERRORS})
    def get(self, request):
        status = serving_status(team=request.team)
        context = self.get_serializer_context()
        return Response({**status, **{key: None if status[key] is None else
                                      ServingExportSerializer(status[key], context=context).data
                                      for key in ("last", "last_finished")}})

    @extend_schema(request=None, responses={202: ServingExportSerializer, **ERRORS})
    def post(self, request):
        """Queue an export of the team's registry (returns the one already queued, if any)."""
        strict(NoFields, body_object(request))
        export = serving_export_request(team=request.team, reason="api", user=request.user)
        return accepted(self.get_serializer(export).data)


class ServingExportDetail(generics.GenericAPIView):
    serializer_class = ServingExportSerializer

    # Ids are positive: the path pattern takes digits only (a "-3" is no route of the API).
    @extend_schema(parameters=[OpenApiParameter("export_id", {"type": "integer", "minimum": 1}, OpenApiParameter.PATH)],
                   responses={200: ServingExportSerializer, **ERRORS})
    def get(self, request, export_id: int):
        export = get_object_or_404(ServingExport, pk=export_id, team=request.team)
        return Response(self.get_serializer(export).data)
