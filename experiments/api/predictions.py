"""Batch predictions: ask (a file of inputs for a model id or a registry reference), follow,
cancel, download the predictions as CSV or NPZ. The page's form validates, with its messages."""

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from experiments.api.bodies import StrictSerializer, body_object, strict, validated
from experiments.api.errors import ERRORS, Conflict, ErrorSerializer
from experiments.api.responses import absolute
from experiments.api.trained_models import BinaryRenderer
from experiments.forms.predictions import PredictionForm
from experiments.models import PredictionJob
from experiments.services.predictions import PredictionCancelError, prediction_cancel, prediction_request
from experiments.views.predictions import DOWNLOADS, get_prediction_for_user, prediction_file_response


class PredictionSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    model = serializers.IntegerField(source="model_id")
    registry_version = serializers.SerializerMethodField()
    downloads = serializers.SerializerMethodField()

    class Meta:
        model = PredictionJob
        fields = ["id", "url", "status", "model", "variant", "requested_as", "registry_version", "input_filename",
                  "rows", "rows_done", "is_try", "error", "preview", "downloads", "created", "started", "finished",
                  "duration_seconds", "device_seconds", "device_kind"]

    def get_url(self, obj) -> str:
        return absolute(self.context, reverse("api:prediction-detail", kwargs={"prediction_id": obj.id}))

    def get_registry_version(self, obj) -> int | None:
        return obj.registry_version.version if obj.registry_version_id else None

    def get_downloads(self, obj) -> dict[str, str]:
        """Download links once the predictions are stored (csv, npz)."""
        return {fmt: absolute(self.context, reverse("api:prediction-download",
                                                    kwargs={"prediction_id": obj.id, "fmt": fmt}))
                for fmt, (field, _) in DOWNLOADS.items() if getattr(obj, f"{field}_id")}


class PredictionInput(StrictSerializer):
    file = serializers.FileField(help_text="Inputs without labels (CSV, zip or NPZ, as the model's dataset).")
    model = serializers.IntegerField(required=False, help_text="A trained model or ensemble of the team.")
    reference = serializers.CharField(required=False, help_text="Or a registry reference: name@alias or name/N.")
    variant = serializers.IntegerField(required=False, help_text="One of the model's made quantized variants.")


class PredictionList(generics.GenericAPIView):
    serializer_class = PredictionSerializer

    @extend_schema(request={"multipart/form-data": PredictionInput}, responses={202: PredictionSerializer, **ERRORS})
    def post(self, request):
        data = body_object(request)
        strict(PredictionInput, {**data, **{k: None for k in request.FILES}})
        form = validated(PredictionForm, {k: v for k, v in data.items() if k not in request.FILES},
                         files=request.FILES, defaults=False, team=request.team)
        job = prediction_request(team=request.team, user=request.user, **form.request_kwargs())
        return Response(self.get_serializer(job).data, status=status.HTTP_202_ACCEPTED)


class PredictionDetail(generics.GenericAPIView):
    serializer_class = PredictionSerializer

    @extend_schema(responses={200: PredictionSerializer, **ERRORS})
    def get(self, request, prediction_id: int):
        return Response(self.get_serializer(get_prediction_for_user(request, prediction_id)).data)


class PredictionCancel(generics.GenericAPIView):
    serializer_class = PredictionSerializer

    @extend_schema(request=None, responses={200: PredictionSerializer, 409: OpenApiResponse(ErrorSerializer), **ERRORS})
    def post(self, request, prediction_id: int):
        job = get_prediction_for_user(request, prediction_id)
        try:
            prediction_cancel(job=job)
        except PredictionCancelError as exc:
            raise Conflict(str(exc)) from None
        job.refresh_from_db()
        return Response(self.get_serializer(job).data)


class PredictionDownload(generics.GenericAPIView):
    renderer_classes = [JSONRenderer, BinaryRenderer]

    @extend_schema(responses={(200, "text/csv"): OpenApiTypes.BINARY, (200, "application/zip"): OpenApiTypes.BINARY,
                              **ERRORS})
    def get(self, request, prediction_id: int, fmt: str):
        return prediction_file_response(get_prediction_for_user(request, prediction_id), fmt)
