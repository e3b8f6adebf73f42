"""Studies: list, create, detail, start/resume/cancel, budget and clone."""

from collections.abc import Callable, Iterable

from django.http import QueryDict
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.response import Response

from experiments.api.bodies import FormError, NoFields, StrictSerializer, body_object, form_input, strict, validated
from experiments.api.errors import ERRORS, Conflict, ErrorSerializer, invalid
from experiments.api.params import choice_param, int_param
from experiments.api.responses import absolute, accepted
from experiments.api.trials import TrialSerializer
from experiments.forms.studies import StudyBudgetForm, StudyForm
from experiments.forms.study_extensions import StudyExtendForm
from experiments.models import Study
from experiments.selectors.studies import clone_values, pruning_savings, studies_progress, studies_tagged
from experiments.selectors.trials import studies_best_trials
from experiments.services.recipes import study_tags_set
from experiments.services.studies import (
    StudyError,
    study_cancel,
    study_create,
    study_resume,
    study_start,
    study_update_budget,
)
from experiments.services.study_extensions import ExtensionRefused, study_extend
from experiments.tuning.bounds import parse_id
from experiments.tuning.compute_options import BACKEND_NAMES
from experiments.tuning.pruning_options import MODEL_FIELDS as PRUNING_FIELDS
from experiments.tuning.pruning_options import PRUNERS
from experiments.tuning.stopping_rules import HELP_TEXTS as STOPPING_HELP
from experiments.tuning.stopping_rules import MODEL_FIELDS as STOPPING_FIELDS
from experiments.views.access import get_dataset_for_user, get_studies_for_user, get_study_for_user


class ProgressSerializer(serializers.Serializer):
    completed = serializers.IntegerField()
    pruned = serializers.IntegerField()
    failed = serializers.IntegerField()
    running = serializers.IntegerField()
    total = serializers.IntegerField()
    max_trials = serializers.IntegerField()


class PruningSavedSerializer(serializers.Serializer):
    pruned = serializers.IntegerField(help_text="Pruned trials.")
    epochs = serializers.IntegerField(help_text="Epochs they did not train (up to epochs × executions each).")
    device_epochs = serializers.IntegerField(help_text="epochs × devices per trial (a CPU trial counts as one).")
    devices = serializers.IntegerField()
    unit = serializers.CharField(help_text="e.g. GPU-epochs")


# Where a response keeps the studies' figures it read (StudySerializer.read_figures).
FIGURES = "study_figures"


class StudyListSerializer(serializers.ListSerializer):
    """Many studies: the figures of all of them read at once, before any is shown."""

    def to_representation(self, data):
        # A related manager is not iterable itself: its rows are .all() (as DRF's own ListSerializer does).
        studies = list(data if isinstance(data, Iterable) else data.all())
        self.child.read_figures(studies)
        return super().to_representation(studies)


class StudySerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    progress = serializers.SerializerMethodField()
    best_trial = serializers.SerializerMethodField()
    pruning_saved = serializers.SerializerMethodField()
    device_seconds = serializers.SerializerMethodField(
        help_text="What its ended trials cost: the sum of each one's wall time times the devices it held.")

    class Meta:
        model = Study
        list_serializer_class = StudyListSerializer
        fields = ["id", "url", "name", "dataset", "hypermodel", "search_space", "tuner", "objective_metric",
                  "objective_direction", "max_trials", "executions_per_trial", "epochs", "batch_size", "patience",
                  "seed", "queue", "backend", "parallelism", "priority", "queue_wait", "initial_random_trials",
                  "precision", "jit_compile", "steps_per_execution", "devices_per_trial", *PRUNING_FIELDS,
                  *STOPPING_FIELDS, "extra_objectives", "constraints", "status", "message", "created", "started",
                  "finished", "progress", "best_trial", "pruning_saved", "seeds", "seeds_used", "tags",
                  "device_seconds", "segments"]

    def get_url(self, obj) -> str:
        return absolute(self.context, reverse("api:study-detail", kwargs={"study_id": obj.id}))

    def read_figures(self, studies: list[Study]) -> dict:
        """The progress and best trial of `studies` and of those read before for this response, in
        two queries whatever their number (never one per study)."""
        figures = self.context.setdefault(FIGURES, {"progress": {}, "best": {}})
        unread = [study for study in studies if study.pk not in figures["progress"]]
        if unread:
            figures["progress"].update(studies_progress(studies=unread))
            figures["best"].update(studies_best_trials(studies=unread))
        return figures

    def to_representation(self, instance):
        self.read_figures([instance])
        return super().to_representation(instance)

    def get_progress(self, obj) -> ProgressSerializer:
        progress = self.context[FIGURES]["progress"][obj.pk]
        return {key: progress[key] for key in ("completed", "pruned", "failed", "running", "total", "max_trials")}

    def get_device_seconds(self, obj) -> float:
        return self.context[FIGURES]["progress"][obj.pk]["device_seconds"]

    def get_pruning_saved(self, obj) -> PruningSavedSerializer(allow_null=True):  # type: ignore[valid-type]
        progress = self.context[FIGURES]["progress"][obj.pk]
        return pruning_savings(obj, pruned=progress["pruned"], trained=progress["pruned_epochs_trained"])

    def get_best_trial(self, obj) -> TrialSerializer(allow_null=True):  # type: ignore[valid-type]
        best = self.context[FIGURES]["best"].get(obj.pk)
        return TrialSerializer(best, context=self.context).data if best is not None else None


# Lists in the API's JSON, text in the page's form (one validation layer: the form's).
STUDY_JSON_FIELDS = ("search_space", "extra_objectives", "constraints")


class StudyInput(StrictSerializer):
    name = serializers.CharField()
    dataset = serializers.IntegerField()
    hypermodel = serializers.CharField()
    search_space = serializers.JSONField(help_text="The editor's JSON list of hyperparameters.")
    tuner = serializers.ChoiceField(choices=Study.Tuner.choices)
    objective_metric = serializers.CharField()
    objective_direction = serializers.ChoiceField(choices=["auto", "min", "max"])
    max_trials = serializers.IntegerField()
    executions_per_trial = serializers.IntegerField()
    epochs = serializers.IntegerField()
    batch_size = serializers.IntegerField()
    patience = serializers.IntegerField()
    seed = serializers.IntegerField(required=False, help_text="Default: a fresh random seed, shown in the answer "
                                                             "and kept on the study; the same seed with the same "
                                                             "settings runs the same search again.")
    queue = serializers.ChoiceField(choices=Study.Queue.choices)
    backend = serializers.ChoiceField(choices=list(BACKEND_NAMES.items()), required=False,
                                      help_text="The Keras backend: tensorflow (default) or jax; a JAX study runs on "
                                                "the JAX workers of its queue (<queue>-jax).")
    parallelism = serializers.IntegerField()
    priority = serializers.ChoiceField(choices=Study.Priority.choices, required=False,
                                       help_text="high, normal (default) or low, among the team's studies waiting "
                                                 "on the queue; it may change while the study runs (budget).")
    initial_random_trials = serializers.IntegerField(required=False, allow_null=True)
    precision = serializers.CharField(required=False)
    jit_compile = serializers.CharField(required=False)
    steps_per_execution = serializers.IntegerField(required=False)
    devices_per_trial = serializers.IntegerField(required=False)
    seed_from = serializers.ListField(child=serializers.IntegerField(), required=False,
                                      help_text="Warm start: ids of earlier studies of the team whose best trials "
                                                "run first.")
    top_k = serializers.IntegerField(required=False, min_value=1, max_value=20,
                                     help_text="Best trials taken from each study in seed_from (default 3).")
    pruner = serializers.ChoiceField(choices=list(PRUNERS), required=False, help_text="Default: none.")
    pruning_startup_trials = serializers.IntegerField(
        required=False, help_text="Default: 5 for median and percentile, 0 for successive_halving and pareto.")
    pruning_warmup_epochs = serializers.IntegerField(required=False)
    pruning_min_trials = serializers.IntegerField(required=False)
    pruning_percentile = serializers.FloatField(required=False, help_text="The percentile pruner's share kept.")
    pruning_min_epochs = serializers.IntegerField(required=False, help_text="Successive halving's first rung.")
    pruning_reduction_factor = serializers.IntegerField(required=False)
    extra_objectives = serializers.JSONField(
        required=False, help_text='Up to two more objectives: [{"metric": "params", "direction": "min"}]; metrics '
                                  'besides the hypermodel\'s: params, latency_ms. The result is a Pareto front.')
    constraints = serializers.JSONField(
        required=False, help_text='[{"metric": "params", "op": "<=", "value": 100000}]: a trial that breaks one is '
                                  'infeasible.')
    stop_target = serializers.FloatField(required=False, allow_null=True, help_text=STOPPING_HELP["stop_target"])
    stop_patience = serializers.IntegerField(required=False, allow_null=True, help_text=STOPPING_HELP["stop_patience"])
    stop_min_delta = serializers.FloatField(required=False, allow_null=True, help_text=STOPPING_HELP["stop_min_delta"])
    stop_device_hours = serializers.FloatField(required=False, allow_null=True,
                                               help_text=STOPPING_HELP["stop_device_hours"])
    start = serializers.BooleanField(required=False, default=False)


class BudgetInput(StrictSerializer):
    max_trials = serializers.IntegerField(required=False)
    parallelism = serializers.IntegerField(required=False)
    priority = serializers.ChoiceField(choices=Study.Priority.choices, required=False)


class ExtendInput(StrictSerializer):
    max_trials = serializers.IntegerField(required=False, help_text="In all, above the trials so far.")
    epochs = serializers.IntegerField(required=False, help_text="Only raised.")
    stop_device_hours = serializers.FloatField(required=False, help_text="The device-hour budget in all.")
    tuner = serializers.ChoiceField(choices=Study.Tuner.choices, required=False,
                                    help_text="Every trial so far is told to it.")


class CloneInput(StrictSerializer):
    name = serializers.CharField(required=False, help_text='Defaults to "<name> (copy)".')
    dataset = serializers.IntegerField(required=False, help_text="Another dataset of the team; defaults to the "
                                                                  "original's.")
    seed_from = serializers.ListField(child=serializers.IntegerField(), required=False,
                                      help_text="Warm start: ids of earlier studies of the team (the original "
                                                "included, if wanted) whose best trials run first. None by default.")
    top_k = serializers.IntegerField(required=False, min_value=1, max_value=20,
                                     help_text="Best trials taken from each study in seed_from (default 3).")


def _ids(value, name: str, example: str) -> list[int]:
    values = value if isinstance(value, list) else [value]
    ids = [None if isinstance(v, bool) else parse_id(v) for v in values]
    if None in ids:
        raise invalid(name, f"Give ids as whole numbers, like {example}.")
    return ids


def seed_studies(request, data: dict) -> list[int]:
    """The `seed_from` study ids of a body (JSON list, or repeated form fields). Another team's
    study is not found (404), as everywhere; the form checks the rest."""
    if data.get("seed_from") in (None, []):
        return []
    if not isinstance(data["seed_from"], list) and not isinstance(request.data, QueryDict):
        raise invalid("seed_from", "Give the studies as a list of ids, like [12, 34].")
    ids = _ids(data["seed_from"], "seed_from", "[12, 34]")
    get_studies_for_user(request, ids)
    return ids


STUDY_ORDERING = {"created", "-created", "name", "-name", "status", "-status", "started", "-started"}


class StudyList(generics.GenericAPIView):
    serializer_class = StudySerializer

    @extend_schema(parameters=[
        OpenApiParameter("status", str, enum=Study.Status.values), OpenApiParameter("dataset", int),
        OpenApiParameter("hypermodel", str), OpenApiParameter("tag", str, description="A tag of one of its trials."),
        OpenApiParameter("q", str, description="Part of the name."),
        OpenApiParameter("ordering", str, enum=sorted(STUDY_ORDERING))],
        responses={200: StudySerializer(many=True), **ERRORS})
    def get(self, request):
        studies = Study.objects.filter(team=request.team).select_related("dataset")
        if value := choice_param(request, "status", Study.Status.values):
            studies = studies.filter(status=value)
        if (dataset := int_param(request, "dataset")) is not None:
            studies = studies.filter(dataset_id=dataset)
        if value := request.query_params.get("hypermodel", "").strip():
            studies = studies.filter(hypermodel=value)
        if value := request.query_params.get("tag", "").strip():
            studies = studies.filter(pk__in=studies_tagged(team=request.team, tag=value))
        if value := request.query_params.get("q", "").strip():
            studies = studies.filter(name__icontains=value)
        ordering = choice_param(request, "ordering", sorted(STUDY_ORDERING)) or "-created"
        page = self.paginate_queryset(studies.order_by(ordering, "-id"))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(request=StudyInput, responses={201: StudySerializer, 202: StudySerializer, **ERRORS})
    def post(self, request):
        data = body_object(request)
        strict(StudyInput, data)
        start = data.pop("start", False)
        if not isinstance(start, bool) and str(start).lower() not in ("true", "false", "on", "off", "1", "0"):
            raise invalid("start", f"Must be true or false, not {start!r}.")
        start = start is True or str(start).lower() in ("true", "on", "1")
        data["seed_from"] = seed_studies(request, data)
        form = validated(StudyForm, data, json_fields=STUDY_JSON_FIELDS, team=request.team, refuse_unused=True)
        study = study_create(team=request.team, user=request.user, **form.cleaned_data)
        if start:
            study_start(study=study)
            study.refresh_from_db()
            return accepted(self.get_serializer(study).data)
        return Response(self.get_serializer(study).data, status=status.HTTP_201_CREATED)


class StudyTagsInput(StrictSerializer):
    tags = serializers.ListField(child=serializers.CharField(), help_text="Lower-cased; at most 10.")


class StudyDetail(generics.GenericAPIView):
    serializer_class = StudySerializer

    @extend_schema(responses={200: StudySerializer, **ERRORS})
    def get(self, request, study_id: int):
        return Response(self.get_serializer(get_study_for_user(request, study_id)).data)

    @extend_schema(request=StudyTagsInput, responses={200: StudySerializer, **ERRORS})
    def patch(self, request, study_id: int):
        """Set the study's tags (the study page's tags field; an ensemble recipe may draw from
        every study of a dataset with a tag). Nothing else of a study changes here."""
        study = get_study_for_user(request, study_id)
        data = body_object(request)
        strict(StudyTagsInput, data)
        tags = data.get("tags")
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise invalid("tags", "Give the tags as a list of text, e.g. [\"ensemble\"].")
        study_tags_set(study=study, tags=tags)
        return Response(self.get_serializer(study).data)


class StudyAction(generics.GenericAPIView):
    """POST runs one lifecycle service on the study; a state it refuses is a 409."""
    serializer_class = StudySerializer
    service: Callable[..., Study]  # set by each subclass ("action" is DRF's own attribute)

    @extend_schema(request=None, responses={202: StudySerializer, 409: ErrorSerializer, **ERRORS})
    def post(self, request, study_id: int):
        study = get_study_for_user(request, study_id)
        strict(NoFields, body_object(request))
        try:
            self.service(study=study)
        except StudyError as exc:
            raise Conflict(str(exc)) from None
        study.refresh_from_db()
        return accepted(self.get_serializer(study).data)


class StudyStart(StudyAction):
    service = staticmethod(study_start)


class StudyResume(StudyAction):
    service = staticmethod(study_resume)


class StudyCancel(StudyAction):
    service = staticmethod(study_cancel)


class StudyBudget(generics.GenericAPIView):
    serializer_class = StudySerializer

    @extend_schema(request=BudgetInput, responses={200: StudySerializer, 409: ErrorSerializer, **ERRORS})
    def patch(self, request, study_id: int):
        study = get_study_for_user(request, study_id)
        data = body_object(request)
        strict(BudgetInput, data)
        data = {"max_trials": study.max_trials, "parallelism": study.parallelism, "priority": study.priority,
                **{k: v for k, v in data.items() if v is not None}}
        form = validated(StudyBudgetForm, data, defaults=False, instance=Study.objects.get(pk=study.pk))
        try:
            study = study_update_budget(study=study, **form.cleaned_data)
        except StudyError as exc:
            raise Conflict(str(exc)) from None
        return Response(self.get_serializer(study).data)

    @extend_schema(exclude=True)
    def post(self, request, study_id: int):
        """Forms and simple clients that cannot PATCH."""
        return self.patch(request, study_id)


class StudyExtend(generics.GenericAPIView):
    serializer_class = StudySerializer

    @extend_schema(request=ExtendInput, responses={202: StudySerializer, 409: ErrorSerializer, **ERRORS})
    def post(self, request, study_id: int):
        """Run a completed, cancelled or failed study again with more trials, more epochs, a larger device-hour
        budget or another tuner; its trials are numbered on and every one so far is told to the tuner. A setting
        that breaks a rule is a 400, a study that is not ended a 409."""
        study = get_study_for_user(request, study_id)
        data = body_object(request)
        strict(ExtendInput, data)
        values = {"max_trials": study.max_trials, "epochs": study.epochs, "tuner": study.tuner,
                  **{k: v for k, v in data.items() if v is not None}}
        form = validated(StudyExtendForm, values, defaults=False)
        try:
            study = study_extend(study=study, user=request.user, **form.cleaned_data)
        except ExtensionRefused as exc:
            raise FormError({name: [message] for name, message in exc.errors.items()}) from None
        except StudyError as exc:
            raise Conflict(str(exc)) from None
        return accepted(self.get_serializer(study).data)


class StudyClone(generics.GenericAPIView):
    serializer_class = StudySerializer

    @extend_schema(request=CloneInput, responses={201: StudySerializer, **ERRORS})
    def post(self, request, study_id: int):
        original = get_study_for_user(request, study_id)
        data = body_object(request)
        strict(CloneInput, data)
        values = clone_values(original)
        # The clone's own fields are type-checked like any body; the original's values are trusted.
        chosen = form_input(StudyForm(team=request.team).fields, {k: data[k] for k in ("name", "top_k") if k in data})
        values.update({k: chosen[k] for k in chosen})
        if data.get("dataset") is not None:
            dataset_id = None if isinstance(data["dataset"], bool) else parse_id(data["dataset"])
            if dataset_id is None:
                raise invalid("dataset", "Give one dataset's id, a whole number like 12.")
            values["dataset"] = get_dataset_for_user(request, dataset_id).id
        values["seed_from"] = seed_studies(request, data)
        form = validated(StudyForm, values, json_fields=STUDY_JSON_FIELDS, defaults=False, team=request.team,
                         refuse_unused=True)
        study = study_create(team=request.team, user=request.user, **form.cleaned_data)
        return Response(self.get_serializer(study).data, status=status.HTTP_201_CREATED)
