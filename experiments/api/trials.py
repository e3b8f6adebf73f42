"""A study's trials: list, detail with its re-runs, epochs, and asking for a re-run."""

import re

from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from experiments.api.bodies import NoFields, body_object, strict
from experiments.api.errors import ERRORS, Conflict, ErrorSerializer, invalid
from experiments.api.params import choice_param, int_param
from experiments.api.responses import absolute
from experiments.models import Trial, TrialEpoch, TrialRerun
from experiments.selectors.trial_reruns import trial_reruns
from experiments.selectors.trials import pareto_rows, trial_order
from experiments.services.trial_reruns import RerunRequestError, trial_rerun_request
from experiments.views.access import get_study_for_user, get_trial_for_user


class SeedSourceSerializer(serializers.Serializer):
    trial = serializers.IntegerField(help_text="The earlier trial's id.")
    study = serializers.IntegerField()
    number = serializers.IntegerField()
    url = serializers.CharField()


class TrialSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    seeded_from = serializers.SerializerMethodField(help_text="The earlier trial whose configuration this warm-start "
                                                              "seed runs again; null for the tuner's own trials.")

    class Meta:
        model = Trial
        fields = ["id", "url", "study", "trial_id", "number", "attempt", "status", "hyperparameters", "score",
                  "best_epoch", "metrics", "error", "worker_host", "worker_name", "started", "finished",
                  "duration_seconds", "compute", "environment", "notes", "tags", "seeded_from", "epochs_trained",
                  "pruning", "feasible", "device_seconds", "device_kind"]

    def get_url(self, obj) -> str:
        return absolute(self.context, reverse("api:trial-detail", kwargs={"study_id": obj.study_id,
                                                                           "trial_pk": obj.pk}))

    def get_seeded_from(self, obj) -> SeedSourceSerializer(allow_null=True):  # type: ignore[valid-type]
        source = obj.seeded_from
        if source is None:
            return None
        url = reverse("api:trial-detail", kwargs={"study_id": source.study_id, "trial_pk": source.pk})
        return {"trial": source.pk, "study": source.study_id, "number": source.number,
                "url": absolute(self.context, url)}


class DifferenceSerializer(serializers.Serializer):
    name = serializers.CharField(required=False)
    original = serializers.JSONField(allow_null=True)
    rerun = serializers.JSONField(allow_null=True)
    difference = serializers.FloatField(allow_null=True, help_text="re-run minus original")
    absolute = serializers.FloatField(allow_null=True)
    relative = serializers.FloatField(allow_null=True, help_text="absolute / |original|")
    relative_percent = serializers.FloatField(allow_null=True)
    identical = serializers.BooleanField()


class EnvironmentDifferenceSerializer(serializers.Serializer):
    key = serializers.CharField(help_text='Dotted, e.g. "versions.tensorflow", "dataset.sha256".')
    original = serializers.JSONField(allow_null=True)
    rerun = serializers.JSONField(allow_null=True)
    input = serializers.BooleanField(help_text="A changed input (dataset, code, seed), not just another machine.")


class RerunComparisonSerializer(serializers.Serializer):
    objective = DifferenceSerializer()
    best_epoch = DifferenceSerializer()
    metrics = DifferenceSerializer(many=True)
    environment_recorded = serializers.BooleanField()
    environment_differences = EnvironmentDifferenceSerializer(many=True)
    same_environment = serializers.BooleanField()
    same_inputs = serializers.BooleanField()
    notes = serializers.ListField(child=serializers.CharField())


class TrialRerunSerializer(serializers.ModelSerializer):
    comparison = serializers.SerializerMethodField()

    class Meta:
        model = TrialRerun
        fields = ["id", "number", "status", "error", "seed", "score", "best_epoch", "metrics", "compute",
                  "environment", "worker_host", "created", "started", "finished", "duration_seconds", "device_seconds",
                  "device_kind", "comparison"]

    def get_comparison(self, obj) -> RerunComparisonSerializer(allow_null=True):  # type: ignore[valid-type]
        return getattr(obj, "comparison", None)


class TrialDetailSerializer(TrialSerializer):
    """A trial with its re-runs, each finished one with how close it came."""

    reruns = serializers.SerializerMethodField()

    class Meta(TrialSerializer.Meta):
        fields = [*TrialSerializer.Meta.fields, "reruns"]

    def get_reruns(self, obj) -> TrialRerunSerializer(many=True):  # type: ignore[valid-type]
        return TrialRerunSerializer(trial_reruns(trial=obj), many=True, context=self.context).data


class AcceptedRerunSerializer(serializers.Serializer):
    url = serializers.CharField(help_text="The trial, whose detail lists its re-runs.")
    rerun = TrialRerunSerializer()


class TrialEpochSerializer(serializers.ModelSerializer):
    class Meta:
        model = TrialEpoch
        fields = ["execution", "epoch", "metrics", "created"]


NAME = re.compile(r"^[A-Za-z0-9_./:-]{1,100}$")


def trial_ordering(raw: str):
    descending = raw.startswith("-")
    name = raw.removeprefix("-")
    if not NAME.match(name):
        raise invalid("ordering", "Order by score, number, started, finished, a metric (e.g. -val_accuracy) or a "
                                   "hyperparameter (hp.units), with - for descending.")
    return trial_order(name, descending=descending)


class TrialList(generics.GenericAPIView):
    serializer_class = TrialSerializer

    @extend_schema(parameters=[
        OpenApiParameter("status", str, enum=Trial.Status.values),
        OpenApiParameter("ordering", str, description="score, number, a metric (-val_accuracy) or hp.<name>"),
        OpenApiParameter("after", int, description="Only trials with a larger pk, by pk (incremental polling).")],
        responses={200: TrialSerializer(many=True), **ERRORS})
    def get(self, request, study_id: int):
        study = get_study_for_user(request, study_id)
        trials = Trial.objects.filter(study=study).select_related("seeded_from").defer("kt_state",
                                                                                      "seeded_from__kt_state")
        if value := choice_param(request, "status", Trial.Status.values):
            trials = trials.filter(status=value)
        after = int_param(request, "after")
        if after is not None:
            trials = trials.filter(pk__gt=after).order_by("pk")
        else:
            trials = trials.order_by(trial_ordering(request.query_params.get("ordering", "").strip() or "number"),
                                     "number", "pk")
        page = self.paginate_queryset(trials)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


class TrialDetail(generics.GenericAPIView):
    serializer_class = TrialDetailSerializer

    @extend_schema(responses={200: TrialDetailSerializer, **ERRORS})
    def get(self, request, study_id: int, trial_pk: int):
        return Response(self.get_serializer(get_trial_for_user(request, study_id, trial_pk)).data)


class TrialRerunCreate(generics.GenericAPIView):
    serializer_class = AcceptedRerunSerializer

    @extend_schema(request=None, responses={202: AcceptedRerunSerializer, 409: ErrorSerializer, **ERRORS})
    def post(self, request, study_id: int, trial_pk: int):
        """Train the trial's configuration again (same seed, settings and split), outside the tuner."""
        trial = get_trial_for_user(request, study_id, trial_pk)
        strict(NoFields, body_object(request))
        try:
            rerun = trial_rerun_request(trial=trial, user=request.user)
        except RerunRequestError as exc:
            raise Conflict(str(exc)) from None
        url = request.build_absolute_uri(reverse("api:trial-detail", kwargs={"study_id": study_id,
                                                                             "trial_pk": trial.pk}))
        data = TrialRerunSerializer(rerun, context=self.get_serializer_context()).data
        return Response({"url": url, "rerun": data}, status=status.HTTP_202_ACCEPTED)


class TrialEpochs(generics.GenericAPIView):
    serializer_class = TrialEpochSerializer

    @extend_schema(responses={200: TrialEpochSerializer(many=True), **ERRORS})
    def get(self, request, study_id: int, trial_pk: int):
        trial = get_trial_for_user(request, study_id, trial_pk)
        page = self.paginate_queryset(TrialEpoch.objects.filter(trial=trial).order_by("execution", "epoch"))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


class ParetoRowSerializer(serializers.Serializer):
    trial = TrialSerializer()
    values = serializers.ListField(child=serializers.FloatField(),
                                   help_text="One per objective, in `objectives`'s order.")


class ParetoFrontSerializer(serializers.Serializer):
    objectives = serializers.ListField(child=serializers.DictField(),
                                       help_text='[{"metric", "direction"}], primary first.')
    front = ParetoRowSerializer(many=True)


class StudyParetoFront(generics.GenericAPIView):
    """The trials of a multi-objective study that no other feasible trial beats on every objective,
    best first by the first objective (what the study page's Pareto table shows). A study with one
    objective has no front: 404 with the reason."""
    serializer_class = ParetoFrontSerializer

    @extend_schema(responses={200: ParetoFrontSerializer, **ERRORS})
    def get(self, request, study_id: int):
        study = get_study_for_user(request, study_id)
        if not study.extra_objectives:
            raise NotFound("This study has one objective: its best trial is its result (best_trial), not a front.")
        objectives = [{"metric": study.objective_metric, "direction": study.objective_direction},
                      *study.extra_objectives]
        rows = pareto_rows(study=study)
        return Response(self.get_serializer({"objectives": objectives, "front": rows}).data)
