"""A model's quantized variants: ask for one (the page's form validates, with its messages), list them with
their figures beside the float model's, download a made one."""

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from experiments.api.bodies import StrictSerializer, body_object, strict, validated
from experiments.api.errors import ERRORS, Conflict, ErrorSerializer, error_body
from experiments.api.responses import absolute
from experiments.api.trained_models import BinaryRenderer
from experiments.forms.variants import VariantRequestForm
from experiments.models import ModelVariant
from experiments.presentation.variants import variant_summary
from experiments.selectors.variants import model_variant, model_variants
from experiments.services.trained_models import ModelFileUnavailable
from experiments.services.variants import variant_cancel, variant_download, variant_request
from experiments.views.access import found_or_404, get_model_for_user
from experiments.views.trained_models import artifact_response


class VariantSerializer(serializers.ModelSerializer):
    summary = serializers.SerializerMethodField(help_text=(
        "Figures on the test split beside the float model's, measured the same way on one worker: metrics "
        "{name: {float, variant}}, size_bytes and latency_ms_batch1/64 {float, variant, ratio}, a warning when "
        "the accuracy drop passes TUNEBOARD_QUANTIZATION_WARN_ACCURACY_DROP, and the runtime that scored it."))
    download = serializers.SerializerMethodField()

    class Meta:
        model = ModelVariant
        fields = ["id", "method", "status", "queue", "error", "queue_wait", "runtime", "summary", "download",
                  "created", "started", "finished", "duration_seconds", "device_seconds", "device_kind"]

    def get_summary(self, obj) -> dict:
        return variant_summary(obj)

    def get_download(self, obj) -> str | None:
        if not obj.artifact_id:
            return None
        return absolute(self.context, reverse("api:model-variant-download",
                                              kwargs={"model_id": obj.model_id, "variant_id": obj.id}))


class VariantInput(StrictSerializer):
    method = serializers.ChoiceField(choices=ModelVariant.Method.values)


class ModelVariants(generics.GenericAPIView):
    serializer_class = VariantSerializer
    pagination_class = None  # a model has a handful of variants at most: one per method that was not refused

    @extend_schema(responses={200: VariantSerializer(many=True), **ERRORS})
    def get(self, request, model_id: int):
        model = get_model_for_user(request, model_id)
        return Response(self.get_serializer(model_variants(model=model), many=True).data)

    @extend_schema(request=VariantInput, responses={202: VariantSerializer, **ERRORS})
    def post(self, request, model_id: int):
        model = get_model_for_user(request, model_id)
        data = body_object(request)
        strict(VariantInput, data)
        form = validated(VariantRequestForm, data, defaults=False, model=model)
        variant = variant_request(model=model, method=form.cleaned_data["method"], user=request.user)
        return Response(self.get_serializer(variant).data, status=status.HTTP_202_ACCEPTED)


class ModelVariantCancel(generics.GenericAPIView):
    serializer_class = VariantSerializer

    @extend_schema(request=None, responses={200: VariantSerializer, 409: OpenApiResponse(ErrorSerializer), **ERRORS})
    def post(self, request, model_id: int, variant_id: int):
        model = get_model_for_user(request, model_id)
        variant = found_or_404(model_variant(model=model, variant_id=variant_id), ModelVariant)
        if not variant_cancel(variant=variant):
            raise Conflict(f"This variant has already ended ({variant.get_status_display().lower()}).")
        variant.refresh_from_db()
        return Response(self.get_serializer(variant).data)


class ModelVariantDownload(generics.GenericAPIView):
    renderer_classes = [JSONRenderer, BinaryRenderer]

    @extend_schema(responses={(200, "application/octet-stream"): OpenApiTypes.BINARY, **ERRORS,
                              500: OpenApiResponse(ErrorSerializer)})
    def get(self, request, model_id: int, variant_id: int):
        variant = model_variant(model=get_model_for_user(request, model_id), variant_id=variant_id)
        found_or_404(variant if variant is not None and variant.artifact_id else None, ModelVariant)
        try:
            return artifact_response(variant_download(variant=variant), variant.artifact)
        except ModelFileUnavailable as exc:
            return Response(error_body(str(exc)), status=500)
