import json

from django.contrib import messages
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from experiments.forms.trained_models import ModelRequestForm
from experiments.forms.variants import VariantRequestForm
from experiments.models import ModelConversion, ModelFile, TrainedModel, TrainedModelEpoch
from experiments.presentation import figures
from experiments.presentation.model_cards import model_card
from experiments.presentation.variants import variant_panel, variant_summary
from experiments.selectors.device_time import model_lineage_device_seconds
from experiments.selectors.ensembles import ensemble_members
from experiments.selectors.fleet import queue_has_live_worker
from experiments.selectors.trained_models import (
    downloads_unavailable,
    model_conversion,
    model_epoch_rows,
    model_files,
    model_learning_curves,
    team_models,
)
from experiments.selectors.trials import study_top_trials
from experiments.selectors.variants import model_variants
from experiments.services.job_kinds import CONVERSION_QUEUE, model_on_jax, queue_place
from experiments.services.trained_models import (
    ModelCancelError,
    ModelFileUnavailable,
    ModelRequestError,
    model_cancel,
    model_file_download,
    trained_models_request,
)
from experiments.states import JOB_ACTIVE
from experiments.views.access import (
    editor_required,
    get_model_for_user,
    get_study_for_user,
    get_trial_for_user,
    team_required,
)
from experiments.views.job_logs import model_logs_context

CONTENT_TYPES = {
    ModelFile.Format.KERAS: "application/zip",  # a .keras file is a zip archive
    ModelFile.Format.SAVEDMODEL: "application/zip",
    ModelFile.Format.TFLITE: "application/octet-stream",
    ModelFile.Format.TFLITE_INT8: "application/octet-stream",
}


@team_required
def model_list(request):
    models = list(team_models(team=request.team))
    for model in models:
        model.validation = figures.model_validation(model)
        model.warnings = figures.model_warnings(model, dominant_label="one member" if figures.dominant_member(
            model.report.get("weights")) is not None else None)
    return render(request, "trained_models/list.html",
                  {"models": models, "any_active": any(m.is_active for m in models)})


def _detail_context(model: TrainedModel) -> dict:
    epochs = model_epoch_rows(model=model)
    phases = []
    for phase, label in TrainedModelEpoch.Phase.choices:
        rows = [row for row in epochs if row["phase"] == phase]
        if rows:
            phases.append({"label": label, "rows": rows,
                           "metric_names": sorted({name for row in rows for name in row["metrics"]})})
    validation = figures.model_validation(model)
    metric_names = sorted(set(validation.metrics) | set(model.test_metrics))
    members = ensemble_members(ensemble=model) if model.is_ensemble else []
    dominant = next((m for m in members if m.dominant), None)
    conversion = model_conversion(model=model)
    return {
        **model_logs_context(model),
        "model": model, "phases": phases, "files": model_files(model=model), "metric_names": metric_names,
        "queue_place": queue_place("models", model),
        "members": members, "dominant": dominant,
        "validation": validation,
        "warnings": figures.model_warnings(
            model, study_epochs=model.study.epochs if model.study_id else None,
            trial_best_epoch=model.trial.best_epoch if model.trial_id else None,
            dominant_label=dominant.display_label if dominant else None),
        "curves": None if model.is_ensemble else model_learning_curves(model=model, epoch_rows=epochs),
        "member_labels": [m.display_label for m in members],
        "best_member_label": _best_member_label(model, members),
        "conversion": conversion, "conversion_queue": CONVERSION_QUEUE,
        "lineage_device_seconds": model_lineage_device_seconds(model),
        "conversion_waits_for_a_worker": conversion is not None and conversion.status == ModelConversion.Status.QUEUED
        and not queue_has_live_worker(queue=CONVERSION_QUEUE),
        "unavailable": downloads_unavailable(model=model, conversion=conversion),
        **variant_panel(model_variants(model=model), queue_is_live=lambda queue: queue_has_live_worker(queue=queue)),
        "variant_form": VariantRequestForm(model=model), "model_on_jax": model_on_jax(model),
    }


def _best_member_label(model: TrainedModel, members: list) -> str:
    """The report names its best member as the worker labelled it; show the page's label."""
    worker_labels = model.report.get("members") or []
    best = (model.report.get("comparison") or {}).get("best_member", {}).get("label")
    if best in worker_labels and len(worker_labels) == len(members):
        return members[worker_labels.index(best)].display_label
    return best or ""


@team_required
def model_detail(request, model_id: int):
    return render(request, "trained_models/detail.html", _detail_context(get_model_for_user(request, model_id)))


@team_required
def model_live(request, model_id: int):
    """The part of the model page that htmx refreshes while the model trains."""
    context = _detail_context(get_model_for_user(request, model_id))
    # The page last saw the job in progress: swap in what its end makes possible (Register, Predict). Or it saw
    # another count of made variants: swap in the forms' variant choices only, leaving what was typed.
    context["just_ended"] = not context["model"].is_active and request.GET.get("seen") in JOB_ACTIVE
    made_before = request.GET.get("made")
    context["variants_made_since"] = made_before is not None and made_before != str(len(context["made_variants"]))
    return render(request, "trained_models/_live.html", context)


def download_error(request, model: TrainedModel, message: str, status: int):
    return render(request, "trained_models/download_error.html", {"model": model, "message": message}, status=status)


def model_file_response(model: TrainedModel, fmt: str):
    """The stored file of `fmt`, streamed without holding it in memory (the page and the API)."""
    file = model.files.select_related("artifact").filter(format=fmt).first()
    if file is None:
        raise Http404("This model has no file in that format.")
    return artifact_response(model_file_download(model=model, file=file), file.artifact, CONTENT_TYPES[fmt])


def artifact_response(chunks, artifact, content_type: str = "application/octet-stream"):
    """A stored file streamed as an attachment, with its size and sha256."""
    response = StreamingHttpResponse(chunks, content_type=content_type)
    response["Content-Length"] = str(artifact.size)
    response["Content-Disposition"] = f'attachment; filename="{artifact.filename}"'
    response["X-Content-SHA256"] = artifact.sha256
    return response


@team_required
def model_download(request, model_id: int, fmt: str):
    model = get_model_for_user(request, model_id)
    try:
        return model_file_response(model, fmt)
    except ModelFileUnavailable as exc:
        return download_error(request, model, str(exc), status=500)


@team_required
def model_card_download(request, model_id: int):
    model = get_model_for_user(request, model_id)
    card = model_card(model=model, files=model_files(model=model), members=ensemble_members(ensemble=model),
                      variants=[variant_summary(variant) for variant in model_variants(model=model)])
    response = HttpResponse(json.dumps(card, indent=2), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{model.name}-v{model.version}-model-card.json"'
    return response


def _request_models(request, study, trials_for):
    form = ModelRequestForm(request.POST, single_trial=trials_for is not None)
    if not form.is_valid():
        messages.error(request, " ".join(f"{form.fields[name].label or name}: {' '.join(errors)}"
                                         for name, errors in form.errors.items()))
        return None
    data = form.cleaned_data
    trials = trials_for if trials_for is not None else study_top_trials(
        study=study, n=data["top_n"], include_pruned=data["include_pruned"])
    try:
        models = trained_models_request(study=study, user=request.user, trials=trials, method=data["method"],
                                        epoch_source=data["epoch_source"], epoch_cap=data["epoch_cap"],
                                        name=data["name"])
    except ModelRequestError as exc:
        messages.error(request, str(exc))
        return None
    # Worded as what happened (queued), not as progress: the message stays on the page the
    # user lands on, whose live part shows the progress and its end.
    verb = "promote" if data["method"] == TrainedModel.Method.PROMOTE else "retrain"
    messages.success(request, f"Queued {len(models)} model{'s' if len(models) != 1 else ''} to {verb}: "
                     + ", ".join(str(m) for m in models) + ".")
    return models


@require_POST
@editor_required
def study_models_request(request, study_id: int):
    study = get_study_for_user(request, study_id)
    models = _request_models(request, study, None)
    if models:
        return redirect("model_list")
    return redirect("study_detail", study_id=study.id)


@require_POST
@editor_required
def trial_models_request(request, study_id: int, trial_pk: int):
    trial = get_trial_for_user(request, study_id, trial_pk)
    models = _request_models(request, trial.study, [trial])
    if models:
        return redirect("model_detail", model_id=models[0].id)
    return redirect("trial_detail", study_id=study_id, trial_pk=trial.pk)


@require_POST
@editor_required
def model_cancel_view(request, model_id: int):
    model = get_model_for_user(request, model_id)
    try:
        model_cancel(model=model)
    except ModelCancelError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Model {model} cancelled.")
    return redirect("model_detail", model_id=model.id)
