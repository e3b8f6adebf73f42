"""Trained models: asking a study for models, list, detail and file downloads."""

import json

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import generics, serializers, status
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response

from experiments.api.bodies import StrictSerializer, body_object, strict, validated
from experiments.api.errors import ERRORS, ErrorSerializer, error_body, invalid
from experiments.api.params import choice_param, int_param
from experiments.api.responses import absolute
from experiments.forms.trained_models import ModelRequestForm
from experiments.models import ModelConversion, TrainedModel
from experiments.selectors.device_time import model_lineage_device_seconds
from experiments.selectors.ensembles import ensemble_members
from experiments.selectors.trained_models import model_conversion, team_models
from experiments.selectors.trials import study_top_trials
from experiments.services.conversions import CONVERTIBLE_FORMATS
from experiments.services.trained_models import ModelFileUnavailable, trained_models_request
from experiments.tuning.bounds import parse_id
from experiments.views.access import get_model_for_user, get_study_for_user, get_trial_for_user
from experiments.views.trained_models import model_file_response


class ModelFileSerializer(serializers.Serializer):
    format = serializers.CharField()
    filename = serializers.CharField()
    size = serializers.IntegerField()
    sha256 = serializers.CharField()
    url = serializers.CharField()


class MemberSerializer(serializers.Serializer):
    position = serializers.IntegerField()
    key = serializers.CharField(help_text='"model:<id>" or "trial:<id>"')
    label = serializers.CharField()
    weight = serializers.FloatField(allow_null=True)
    val_metrics = serializers.DictField()
    test_metrics = serializers.DictField()


class ConversionSerializer(serializers.ModelSerializer):
    """The formats the model's own worker could not make (no TensorFlow there), made afterwards from
    its .keras file by a TensorFlow worker of the cpu queue; they join `files` when it completes."""

    formats = serializers.ListField(child=serializers.ChoiceField(choices=CONVERTIBLE_FORMATS))
    unavailable = serializers.DictField(child=serializers.CharField(),
                                        help_text="Formats it could not make, with the reason.")

    class Meta:
        model = ModelConversion
        fields = ["status", "formats", "error", "unavailable", "worker_host", "created", "started", "finished",
                  "duration_seconds", "device_seconds", "device_kind"]


class TrainedModelSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    files = serializers.SerializerMethodField()
    members = serializers.SerializerMethodField()
    conversion = serializers.SerializerMethodField(
        help_text="The latest conversion making SavedModel/TFLite from the .keras file, or null.")
    lineage_device_seconds = serializers.SerializerMethodField(
        help_text="Device time of everything that made it: its own job's runs, the trial it came from, and "
                  "for an ensemble its members' lineages.")

    class Meta:
        model = TrainedModel
        fields = ["id", "url", "name", "version", "kind", "method", "status", "error", "dataset", "study", "trial",
                  "epoch_source", "epoch_cap", "greedy_rounds", "seed", "best_epoch", "epochs", "hyperparameters",
                  "val_metrics", "test_metrics", "report", "signature", "versions", "compute", "environment",
                  "created", "started", "finished", "duration_seconds", "device_seconds", "device_kind",
                  "lineage_device_seconds", "files", "members", "conversion"]

    def get_url(self, obj) -> str:
        name = "api:ensemble-detail" if obj.is_ensemble else "api:model-detail"
        key = "ensemble_id" if obj.is_ensemble else "model_id"
        return absolute(self.context, reverse(name, kwargs={key: obj.id}))

    def get_files(self, obj) -> ModelFileSerializer(many=True):  # type: ignore[valid-type]
        return [{"format": f.format, "filename": f.artifact.filename, "size": f.artifact.size,
                 "sha256": f.artifact.sha256,
                 "url": absolute(self.context, reverse("api:model-download", kwargs={"model_id": obj.id,
                                                                                     "fmt": f.format}))}
                for f in obj.files.select_related("artifact")]

    def get_lineage_device_seconds(self, obj) -> float | None:
        return model_lineage_device_seconds(obj)

    @extend_schema_field(ConversionSerializer(allow_null=True))
    def get_conversion(self, obj) -> dict | None:
        conversion = model_conversion(model=obj)
        return None if conversion is None else ConversionSerializer(conversion).data

    def get_members(self, obj) -> MemberSerializer(many=True):  # type: ignore[valid-type]
        if not obj.is_ensemble:
            return []
        return [{"position": m.position, "key": f"model:{m.model_id}" if m.model_id else f"trial:{m.trial_id}",
                 "label": m.display_label, "weight": m.weight, "val_metrics": m.val_metrics,
                 "test_metrics": m.test_metrics} for m in ensemble_members(ensemble=obj)]


class ModelRequestInput(StrictSerializer):
    top_n = serializers.IntegerField(required=False)
    trial = serializers.IntegerField(required=False, help_text="One trial's pk instead of top_n.")
    method = serializers.ChoiceField(choices=["retrain", "promote"], required=False)
    epoch_source = serializers.ChoiceField(choices=["detect", "recorded"], required=False)
    epoch_cap = serializers.IntegerField(required=False)
    name = serializers.CharField(required=False, allow_blank=True)
    include_pruned = serializers.BooleanField(required=False, default=False,
                                              help_text="With top_n: pick among pruned trials too.")


class AcceptedModelsSerializer(serializers.Serializer):
    url = serializers.CharField()
    models = TrainedModelSerializer(many=True)


class StudyModels(generics.GenericAPIView):
    serializer_class = TrainedModelSerializer

    @extend_schema(request=ModelRequestInput, responses={202: AcceptedModelsSerializer, **ERRORS})
    def post(self, request, study_id: int):
        study = get_study_for_user(request, study_id)
        data = body_object(request)
        strict(ModelRequestInput, data)
        trial_pk = data.pop("trial", None)
        single = trial_pk is not None
        if single and (isinstance(trial_pk, bool) or parse_id(trial_pk) is None):
            raise invalid("trial", "Give the trial's id (a whole number).")
        form = validated(ModelRequestForm, data, single_trial=single, study=study)
        if single:
            trials = [get_trial_for_user(request, study.id, parse_id(trial_pk))]
        else:
            trials = study_top_trials(study=study, n=form.cleaned_data["top_n"],
                                      include_pruned=form.cleaned_data["include_pruned"])
        cleaned = form.cleaned_data
        models = trained_models_request(study=study, user=request.user, trials=trials, method=cleaned["method"],
                                        epoch_source=cleaned["epoch_source"], epoch_cap=cleaned["epoch_cap"],
                                        name=cleaned["name"])
        url = request.build_absolute_uri(reverse("api:model-list") + f"?study={study.id}")
        return Response({"url": url, "models": self.get_serializer(models, many=True).data},
                        status=status.HTTP_202_ACCEPTED)


class ModelList(generics.GenericAPIView):
    serializer_class = TrainedModelSerializer

    @extend_schema(parameters=[
        OpenApiParameter("dataset", int), OpenApiParameter("study", int),
        OpenApiParameter("status", str, enum=TrainedModel.Status.values),
        OpenApiParameter("kind", str, enum=TrainedModel.Kind.values)],
        responses={200: TrainedModelSerializer(many=True), **ERRORS})
    def get(self, request):
        models = team_models(team=request.team)
        for name in ("dataset", "study"):
            if (value := int_param(request, name)) is not None:
                models = models.filter(**{f"{name}_id": value})
        if value := choice_param(request, "status", TrainedModel.Status.values):
            models = models.filter(status=value)
        if value := choice_param(request, "kind", TrainedModel.Kind.values):
            models = models.filter(kind=value)
        page = self.paginate_queryset(models.order_by("-created", "-id").prefetch_related("conversions"))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


class ModelDetail(generics.GenericAPIView):
    serializer_class = TrainedModelSerializer

    @extend_schema(responses={200: TrainedModelSerializer, **ERRORS})
    def get(self, request, model_id: int):
        return Response(self.get_serializer(get_model_for_user(request, model_id)).data)


class BinaryRenderer(BaseRenderer):
    media_type = "application/octet-stream"
    format = "bin"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return json.dumps(data).encode() if isinstance(data, dict) else data


class ModelDownload(generics.GenericAPIView):
    renderer_classes = [JSONRenderer, BinaryRenderer]

    @extend_schema(responses={(200, "application/octet-stream"): OpenApiTypes.BINARY,
                              (200, "application/zip"): OpenApiTypes.BINARY, **ERRORS,
                              500: OpenApiResponse(ErrorSerializer)})
    def get(self, request, model_id: int, fmt: str):
        model = get_model_for_user(request, model_id)
        try:
            return model_file_response(model, fmt)
        except ModelFileUnavailable as exc:
            return Response(error_body(str(exc)), status=500)
