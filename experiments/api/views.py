"""The REST API: thin views over the same forms, services and selectors as the pages."""

import json
import re
from collections.abc import Callable
from datetime import date

from django.conf import settings
from django.db.models import F
from django.db.models.fields.json import KeyTransform
from django.http import Http404, QueryDict
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, generics, status
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response

from experiments.api import serializers as s
from experiments.api.auth import OwnerOnly
from experiments.api.bodies import body_object, form_input, with_initial
from experiments.api.errors import NON_FIELD, Conflict, error_body
from experiments.api.pagination import Pagination
from experiments.forms import (
    BundledDatasetForm,
    DatasetUploadForm,
    EnsembleForm,
    ModelRequestForm,
    StudyBudgetForm,
    StudyForm,
)
from experiments.models import Dataset, NotificationDelivery, Study, TrainedModel, Trial, TrialEpoch
from experiments.presentation.comparison import ComparisonError, parse_study_ids
from experiments.selectors.datasets import team_datasets
from experiments.selectors.notifications import team_deliveries
from experiments.selectors.queueing import fleet_rows
from experiments.selectors.ranking import leaderboard
from experiments.selectors.studies import studies_compared, studies_tagged, study_counts
from experiments.selectors.trained_models import team_models
from experiments.selectors.trials import study_top_trials
from experiments.selectors.webhooks import team_webhooks
from experiments.services.audit import VERB_LABELS
from experiments.services.datasets import dataset_create_bundled, dataset_create_upload
from experiments.services.ensembles import EnsembleError, ensemble_create
from experiments.services.studies import study_create, study_update_budget
from experiments.services.trained_models import ModelFileUnavailable, trained_models_request
from experiments.services.trial_reruns import RerunRequestError, trial_rerun_request
from experiments.services.trial_runs import StudyError, study_cancel, study_resume, study_start
from experiments.tuning.bounds import parse_id
from experiments.tuning.cloning import clone_values
from experiments.views.access import (
    get_dataset_for_user,
    get_model_for_user,
    get_studies_for_user,
    get_study_for_user,
    get_trial_for_user,
)
from experiments.views.audit import AuditFilterForm
from experiments.views.models import model_file_response

MAX_ID = s.MAX_ID
ERRORS = {code: OpenApiResponse(s.ErrorSerializer) for code in (400, 401, 403, 404)}


class FormError(exceptions.ValidationError):
    """A form's errors as they are (so the messages are the page's)."""

    def __init__(self, errors: dict):
        super().__init__(errors)


def _invalid(field: str | None, message: str):
    return exceptions.ValidationError({field or NON_FIELD: [message]})


def int_param(request, name: str, *, minimum: int = 0) -> int | None:
    raw = request.query_params.get(name, "").strip()
    if not raw:
        return None
    if not (raw.isascii() and raw.isdigit()) or int(raw) > MAX_ID or int(raw) < minimum:
        raise _invalid(name, f"Must be a whole number from {minimum} to {MAX_ID}, not {raw!r}.")
    return int(raw)


def date_param(request, name: str) -> date | None:
    raw = request.query_params.get(name, "").strip()
    if not raw:
        return None
    try:
        return date.fromisoformat(raw)
    except ValueError:
        raise _invalid(name, f"Write the date as YYYY-MM-DD, not {raw!r}.") from None


def choice_param(request, name: str, choices) -> str:
    raw = request.query_params.get(name, "")
    if raw and raw not in choices:
        raise _invalid(name, f"Must be one of {', '.join(choices)}.")
    return raw


def strict(serializer_class, data: dict) -> None:
    """Refuse unknown fields before the forms see the body."""
    unknown = sorted(set(data) - set(serializer_class().fields))
    if unknown:
        raise exceptions.ValidationError({name: ["Unknown field."] for name in unknown})


def validated(form_class, data: dict, *, files=None, json_fields: tuple[str, ...] = (), defaults: bool = True,
              **kwargs):
    """The page's form, bound to the body as the page would post it, and valid; else a 400 with the
    form's own messages."""
    fields = form_class(**kwargs).fields
    values = form_input(fields, data, json_fields=json_fields)
    form = form_class(with_initial(fields, values) if defaults else values, files, **kwargs)
    if not form.is_valid():
        errors = dict(form.errors)
        for row, messages in getattr(form, "search_space_errors", {}).items():
            errors[f"search_space.{row}"] = messages
        raise FormError(errors)
    return form


def _ids(value, name: str, example: str) -> list[int]:
    values = value if isinstance(value, list) else [value]
    ids = [None if isinstance(v, bool) else parse_id(v) for v in values]
    if None in ids:
        raise _invalid(name, f"Give ids as whole numbers, like {example}.")
    return ids


def seed_studies(request, data: dict) -> list[int]:
    """The `seed_from` study ids of a body (JSON list, or repeated form fields). Another team's
    study is not found (404), as everywhere; the form checks the rest."""
    if data.get("seed_from") in (None, []):
        return []
    if not isinstance(data["seed_from"], list) and not isinstance(request.data, QueryDict):
        raise _invalid("seed_from", "Give the studies as a list of ids, like [12, 34].")
    ids = _ids(data["seed_from"], "seed_from", "[12, 34]")
    get_studies_for_user(request, ids)
    return ids


def _accepted(data: dict, url: str | None = None) -> Response:
    return Response({"url": url or data["url"], **data}, status=status.HTTP_202_ACCEPTED)


# Datasets

class DatasetList(generics.GenericAPIView):
    serializer_class = s.DatasetSerializer

    @extend_schema(parameters=[
        OpenApiParameter("kind", str, enum=Dataset.Kind.values),
        OpenApiParameter("task", str, enum=Dataset.Task.values),
        OpenApiParameter("q", str, description="Part of the name.")], responses={200: s.DatasetSerializer(many=True),
                                                                                **ERRORS})
    def get(self, request):
        datasets = team_datasets(team=request.team)
        if kind := choice_param(request, "kind", Dataset.Kind.values):
            datasets = datasets.filter(kind=kind)
        if task := choice_param(request, "task", Dataset.Task.values):
            datasets = datasets.filter(task=task)
        if q := request.query_params.get("q", "").strip():
            datasets = datasets.filter(name__icontains=q)
        page = self.paginate_queryset(datasets)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(request={"multipart/form-data": s.DatasetUploadInput, "application/json": s.BundledDatasetInput},
                   responses={201: s.DatasetSerializer, **ERRORS})
    def post(self, request):
        data = body_object(request)
        if "bundled_name" in data and "file" not in request.FILES:
            strict(s.BundledDatasetInput, data)
            form = validated(BundledDatasetForm, data)
            dataset = dataset_create_bundled(team=request.team, user=request.user, **form.cleaned_data)
        else:
            strict(s.DatasetUploadInput, {**data, **{k: None for k in request.FILES}})
            form = validated(DatasetUploadForm, {k: v for k, v in data.items() if k not in request.FILES},
                             files=request.FILES)
            upload = form.cleaned_data["file"]
            dataset = dataset_create_upload(
                team=request.team, user=request.user, filename=upload.name, data=upload,
                size=upload.size, limit_mb=settings.UPLOAD_MAX_MB, options=form.upload_options(),
                **{k: form.cleaned_data[k] for k in ("name", "val_fraction", "test_fraction", "seed")})
        return Response(self.get_serializer(dataset).data, status=status.HTTP_201_CREATED)


class DatasetDetail(generics.GenericAPIView):
    serializer_class = s.DatasetSerializer

    @extend_schema(responses={200: s.DatasetSerializer, **ERRORS})
    def get(self, request, dataset_id: int):
        return Response(self.get_serializer(get_dataset_for_user(request, dataset_id)).data)


# Studies

STUDY_ORDERING = {"created", "-created", "name", "-name", "status", "-status", "started", "-started"}


class StudyList(generics.GenericAPIView):
    serializer_class = s.StudySerializer

    @extend_schema(parameters=[
        OpenApiParameter("status", str, enum=Study.Status.values), OpenApiParameter("dataset", int),
        OpenApiParameter("hypermodel", str), OpenApiParameter("tag", str, description="A tag of one of its trials."),
        OpenApiParameter("q", str, description="Part of the name."),
        OpenApiParameter("ordering", str, enum=sorted(STUDY_ORDERING))],
        responses={200: s.StudySerializer(many=True), **ERRORS})
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
        context = {**self.get_serializer_context(), "progress": study_counts([st.id for st in page]),
                   "with_best": True}
        return self.get_paginated_response(s.StudySerializer(page, many=True, context=context).data)

    @extend_schema(request=s.StudyInput, responses={201: s.StudySerializer, 202: s.StudySerializer, **ERRORS})
    def post(self, request):
        data = body_object(request)
        strict(s.StudyInput, data)
        start = data.pop("start", False)
        if not isinstance(start, bool) and str(start).lower() not in ("true", "false", "on", "off", "1", "0"):
            raise _invalid("start", f"Must be true or false, not {start!r}.")
        start = start is True or str(start).lower() in ("true", "on", "1")
        data["seed_from"] = seed_studies(request, data)
        form = validated(StudyForm, data, json_fields=("search_space",), team=request.team, refuse_unused=True)
        study = study_create(team=request.team, user=request.user, **form.cleaned_data)
        if start:
            study_start(study=study)
            study.refresh_from_db()
            return _accepted(self.get_serializer(study).data)
        return Response(self.get_serializer(study).data, status=status.HTTP_201_CREATED)


class StudyDetail(generics.GenericAPIView):
    serializer_class = s.StudySerializer

    @extend_schema(responses={200: s.StudySerializer, **ERRORS})
    def get(self, request, study_id: int):
        return Response(self.get_serializer(get_study_for_user(request, study_id)).data)


class StudyAction(generics.GenericAPIView):
    """POST runs one lifecycle service on the study; a state it refuses is a 409."""
    serializer_class = s.StudySerializer
    service: Callable[..., Study]  # set by each subclass ("action" is DRF's own attribute)

    @extend_schema(request=None, responses={202: s.StudySerializer, 409: s.ErrorSerializer, **ERRORS})
    def post(self, request, study_id: int):
        study = get_study_for_user(request, study_id)
        strict(s.NoFields, body_object(request))
        try:
            self.service(study=study)
        except StudyError as exc:
            raise Conflict(str(exc)) from None
        study.refresh_from_db()
        return _accepted(self.get_serializer(study).data)


class StudyStart(StudyAction):
    service = staticmethod(study_start)


class StudyResume(StudyAction):
    service = staticmethod(study_resume)


class StudyCancel(StudyAction):
    service = staticmethod(study_cancel)


class StudyBudget(generics.GenericAPIView):
    serializer_class = s.StudySerializer

    @extend_schema(request=s.BudgetInput, responses={200: s.StudySerializer, 409: s.ErrorSerializer, **ERRORS})
    def patch(self, request, study_id: int):
        study = get_study_for_user(request, study_id)
        data = body_object(request)
        strict(s.BudgetInput, data)
        data = {"max_trials": study.max_trials, "parallelism": study.parallelism,
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


class StudyClone(generics.GenericAPIView):
    serializer_class = s.StudySerializer

    @extend_schema(request=s.CloneInput, responses={201: s.StudySerializer, **ERRORS})
    def post(self, request, study_id: int):
        original = get_study_for_user(request, study_id)
        data = body_object(request)
        strict(s.CloneInput, data)
        values = clone_values(original)
        # The clone's own fields are type-checked like any body; the original's values are trusted.
        chosen = form_input(StudyForm(team=request.team).fields, {k: data[k] for k in ("name", "top_k") if k in data})
        values.update({k: chosen[k] for k in chosen})
        if data.get("dataset") is not None:
            dataset_id = None if isinstance(data["dataset"], bool) else parse_id(data["dataset"])
            if dataset_id is None:
                raise _invalid("dataset", "Give one dataset's id, a whole number like 12.")
            values["dataset"] = get_dataset_for_user(request, dataset_id).id
        values["seed_from"] = seed_studies(request, data)
        form = validated(StudyForm, values, json_fields=("search_space",), defaults=False, team=request.team,
                         refuse_unused=True)
        study = study_create(team=request.team, user=request.user, **form.cleaned_data)
        return Response(self.get_serializer(study).data, status=status.HTTP_201_CREATED)



class StudyCompare(generics.GenericAPIView):
    serializer_class = s.StudyComparisonSerializer

    @extend_schema(parameters=[OpenApiParameter(
        "studies", int, many=True, explode=True, required=True,
        description="2 to 4 ids of studies of one dataset (repeat the parameter, or separate them with commas).")],
        responses={200: s.StudyComparisonSerializer, **ERRORS})
    def get(self, request):
        try:
            studies = get_studies_for_user(request, parse_study_ids(request.query_params.getlist("studies")))
            compared = studies_compared(studies=studies)
        except ComparisonError as exc:
            raise _invalid("studies", str(exc)) from None
        for entry in compared["studies"]:
            entry["url"] = request.build_absolute_uri(reverse("api:study-detail", kwargs={"study_id": entry["id"]}))
            if entry["best_trial"]:
                entry["best_trial"]["url"] = request.build_absolute_uri(reverse(
                    "api:trial-detail", kwargs={"study_id": entry["id"], "trial_pk": entry["best_trial"]["id"]}))
        return Response(self.get_serializer({"dataset": studies[0].dataset_id, **compared}).data)


# Trials

NAME = re.compile(r"^[A-Za-z0-9_./:-]{1,100}$")


def trial_ordering(raw: str):
    descending = raw.startswith("-")
    name = raw.removeprefix("-")
    if not NAME.match(name):
        raise _invalid("ordering", "Order by score, number, started, finished, a metric (e.g. -val_accuracy) or a "
                                   "hyperparameter (hp.units), with - for descending.")
    if name in ("score", "number", "started", "finished", "duration_seconds", "id"):
        expression = F(name)
    elif name.startswith("hp."):
        expression = KeyTransform(name[3:], "hyperparameters")
    else:
        expression = KeyTransform(name, "metrics")
    return expression.desc(nulls_last=True) if descending else expression.asc(nulls_last=True)


class TrialList(generics.GenericAPIView):
    serializer_class = s.TrialSerializer

    @extend_schema(parameters=[
        OpenApiParameter("status", str, enum=Trial.Status.values),
        OpenApiParameter("ordering", str, description="score, number, a metric (-val_accuracy) or hp.<name>"),
        OpenApiParameter("after", int, description="Only trials with a larger pk, by pk (incremental polling).")],
        responses={200: s.TrialSerializer(many=True), **ERRORS})
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
    serializer_class = s.TrialDetailSerializer

    @extend_schema(responses={200: s.TrialDetailSerializer, **ERRORS})
    def get(self, request, study_id: int, trial_pk: int):
        return Response(self.get_serializer(get_trial_for_user(request, study_id, trial_pk)).data)


class TrialRerunCreate(generics.GenericAPIView):
    serializer_class = s.AcceptedRerunSerializer

    @extend_schema(request=None, responses={202: s.AcceptedRerunSerializer, 409: s.ErrorSerializer, **ERRORS})
    def post(self, request, study_id: int, trial_pk: int):
        """Train the trial's configuration again (same seed, settings and split), outside the tuner."""
        trial = get_trial_for_user(request, study_id, trial_pk)
        strict(s.NoFields, body_object(request))
        try:
            rerun = trial_rerun_request(trial=trial, user=request.user)
        except RerunRequestError as exc:
            raise Conflict(str(exc)) from None
        url = request.build_absolute_uri(reverse("api:trial-detail", kwargs={"study_id": study_id,
                                                                             "trial_pk": trial.pk}))
        data = s.TrialRerunSerializer(rerun, context=self.get_serializer_context()).data
        return Response({"url": url, "rerun": data}, status=status.HTTP_202_ACCEPTED)


class TrialEpochs(generics.GenericAPIView):
    serializer_class = s.TrialEpochSerializer

    @extend_schema(responses={200: s.TrialEpochSerializer(many=True), **ERRORS})
    def get(self, request, study_id: int, trial_pk: int):
        trial = get_trial_for_user(request, study_id, trial_pk)
        page = self.paginate_queryset(TrialEpoch.objects.filter(trial=trial).order_by("execution", "epoch"))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


# Models and ensembles

class StudyModels(generics.GenericAPIView):
    serializer_class = s.TrainedModelSerializer

    @extend_schema(request=s.ModelRequestInput, responses={202: s.AcceptedModelsSerializer, **ERRORS})
    def post(self, request, study_id: int):
        study = get_study_for_user(request, study_id)
        data = body_object(request)
        strict(s.ModelRequestInput, data)
        trial_pk = data.pop("trial", None)
        single = trial_pk is not None
        if single and (isinstance(trial_pk, bool) or parse_id(trial_pk) is None):
            raise _invalid("trial", "Give the trial's id (a whole number).")
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
    serializer_class = s.TrainedModelSerializer

    @extend_schema(parameters=[
        OpenApiParameter("dataset", int), OpenApiParameter("study", int),
        OpenApiParameter("status", str, enum=TrainedModel.Status.values),
        OpenApiParameter("kind", str, enum=TrainedModel.Kind.values)],
        responses={200: s.TrainedModelSerializer(many=True), **ERRORS})
    def get(self, request):
        models = team_models(team=request.team)
        for name in ("dataset", "study"):
            if (value := int_param(request, name)) is not None:
                models = models.filter(**{f"{name}_id": value})
        if value := choice_param(request, "status", TrainedModel.Status.values):
            models = models.filter(status=value)
        if value := choice_param(request, "kind", TrainedModel.Kind.values):
            models = models.filter(kind=value)
        page = self.paginate_queryset(models.order_by("-created", "-id"))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


class ModelDetail(generics.GenericAPIView):
    serializer_class = s.TrainedModelSerializer

    @extend_schema(responses={200: s.TrainedModelSerializer, **ERRORS})
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
                              500: OpenApiResponse(s.ErrorSerializer)})
    def get(self, request, model_id: int, fmt: str):
        model = get_model_for_user(request, model_id)
        try:
            return model_file_response(model, fmt)
        except ModelFileUnavailable as exc:
            return Response(error_body(str(exc)), status=500)


class EnsembleCreate(generics.GenericAPIView):
    serializer_class = s.TrainedModelSerializer

    @extend_schema(request=s.EnsembleInput, responses={202: s.TrainedModelSerializer, **ERRORS})
    def post(self, request):
        data = body_object(request)
        strict(s.EnsembleInput, data)
        if isinstance(data.get("members"), str):
            data["members"] = [data["members"]]
        form = validated(EnsembleForm, data, team=request.team)
        cleaned = form.cleaned_data
        try:
            ensemble = ensemble_create(team=request.team, user=request.user, members=cleaned["members"],
                                       method=cleaned["method"], rounds=cleaned["greedy_rounds"], seed=cleaned["seed"],
                                       name=cleaned["name"])
        except EnsembleError as exc:
            raise _invalid(None, str(exc)) from None
        return _accepted(self.get_serializer(ensemble).data)


class EnsembleDetail(generics.GenericAPIView):
    serializer_class = s.TrainedModelSerializer

    @extend_schema(responses={200: s.TrainedModelSerializer, **ERRORS})
    def get(self, request, ensemble_id: int):
        model = get_model_for_user(request, ensemble_id)
        if not model.is_ensemble:
            raise Http404
        return Response(self.get_serializer(model).data)


# Leaderboard and workers

class LeaderboardView(generics.GenericAPIView):
    serializer_class = s.LeaderboardSerializer
    renderer_classes = [JSONRenderer]
    pagination_class = Pagination

    @extend_schema(parameters=[
        OpenApiParameter("study", int), OpenApiParameter("hypermodel", str), OpenApiParameter("author", int),
        OpenApiParameter("since", OpenApiTypes.DATE), OpenApiParameter("until", OpenApiTypes.DATE),
        OpenApiParameter("sort", str, description="test, val, name, kind, study, hypermodel, author, created "
                                                   "or hp:<name>"),
        OpenApiParameter("dir", str, enum=["asc", "desc"]), OpenApiParameter("page", int),
        OpenApiParameter("page_size", int), OpenApiParameter("format", str, enum=["json", "csv"])],
        responses={(200, "application/json"): s.LeaderboardSerializer, (200, "text/csv"): OpenApiTypes.STR,
                   **ERRORS})
    def get(self, request, dataset_id: int):
        dataset = get_dataset_for_user(request, dataset_id)
        direction = choice_param(request, "dir", ["asc", "desc"])
        fmt = choice_param(request, "format", ["json", "csv"])
        board = leaderboard(team=request.team, dataset=dataset, study_id=int_param(request, "study"),
                            hypermodel=request.query_params.get("hypermodel", ""),
                            author_id=int_param(request, "author"), since=date_param(request, "since"),
                            until=date_param(request, "until"), sort=request.query_params.get("sort", "test"),
                            descending=None if not direction else direction == "desc")
        if fmt == "csv":
            from experiments.views.leaderboard import _csv
            return _csv(dataset, board)
        page = self.paginate_queryset(board["rows"])
        rows = [{**{k: row[k] for k in s.LeaderboardRowSerializer().fields}} for row in page]
        return Response({"dataset": dataset.id, "metric": board["metric"], "direction": board["ranking"]["direction"],
                         "hp_names": board["hp_names"], "count": self.paginator.page.paginator.count,
                         "next": self.paginator.get_next_link(), "previous": self.paginator.get_previous_link(),
                         "results": s.LeaderboardRowSerializer(rows, many=True).data})


class WorkerList(generics.GenericAPIView):
    serializer_class = s.WorkerSerializer

    @extend_schema(responses={200: s.WorkerSerializer(many=True), **ERRORS})
    def get(self, request):
        rows = []
        for row in fleet_rows(team=request.team):
            w = row["worker"]
            rows.append({"name": w.name, "hostname": w.hostname, "queues": w.queues, "devices": w.devices,
                         "concurrency": w.concurrency, "versions": w.versions, "started": w.started,
                         "last_heartbeat": w.last_heartbeat, "stopped": w.stopped, "alive": row["alive"],
                         "trials": [{"study": t.study_id, "trial": t.pk, "trial_id": t.trial_id} for t in row["trials"]
                                    if t.study.team_id == request.team.id],
                         "other_teams_trials": row["other_teams"]})
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)




class WebhookList(generics.GenericAPIView):
    serializer_class = s.WebhookSerializer

    @extend_schema(responses={200: s.WebhookSerializer(many=True), **ERRORS})
    def get(self, request):
        page = self.paginate_queryset(team_webhooks(team=request.team))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


class DeliveryList(generics.GenericAPIView):
    serializer_class = s.DeliverySerializer

    @extend_schema(parameters=[
        OpenApiParameter("status", str, enum=NotificationDelivery.Status.values),
        OpenApiParameter("channel", str, enum=NotificationDelivery.Channel.values)],
        responses={200: s.DeliverySerializer(many=True), **ERRORS})
    def get(self, request):
        rows = team_deliveries(team=request.team, limit=None)
        if value := choice_param(request, "status", NotificationDelivery.Status.values):
            rows = rows.filter(status=value)
        if value := choice_param(request, "channel", NotificationDelivery.Channel.values):
            rows = rows.filter(channel=value)
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


class AuditList(generics.GenericAPIView):
    """The team's audit log (owners only), newest first."""

    serializer_class = s.AuditEventSerializer
    permission_classes = [OwnerOnly]

    @extend_schema(parameters=[
        OpenApiParameter("actor", int, description="A user id."),
        OpenApiParameter("action", str, enum=sorted(VERB_LABELS)),
        OpenApiParameter("since", OpenApiTypes.DATE), OpenApiParameter("until", OpenApiTypes.DATE)],
        responses={200: s.AuditEventSerializer(many=True), **ERRORS})
    def get(self, request):
        params = {key: request.query_params[key] for key in AuditFilterForm.base_fields if key in request.query_params}
        form = AuditFilterForm(params, team=request.team)
        if not form.is_valid():
            raise FormError(form.errors)
        page = self.paginate_queryset(form.events(request.team))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)
