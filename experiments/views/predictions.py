"""Batch prediction pages: asking for one (from a model page or /predictions/new/) and each job's page with its live
progress, cancel and downloads."""

from django.contrib import messages
from django.http import Http404, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from experiments.forms.predictions import PredictionForm
from experiments.models import PredictionJob
from experiments.presentation.variants import made_by
from experiments.selectors.artifacts import artifact_iter_chunks
from experiments.selectors.predictions import team_prediction
from experiments.selectors.trained_models import team_models
from experiments.services.job_kinds import queue_place
from experiments.services.predictions import PredictionCancelError, prediction_cancel, prediction_request
from experiments.views.access import editor_required, forbidden, found_or_404, get_model_for_user, team_required

DOWNLOADS = {"csv": ("predictions_csv", "text/csv"), "npz": ("predictions_npz", "application/zip")}


def get_prediction_for_user(request, prediction_id: int) -> PredictionJob:
    return found_or_404(team_prediction(team=request.team, prediction_id=prediction_id), PredictionJob)


def form_message(form: PredictionForm, *, shown_by_fields=()) -> str:
    """The form's messages in one line, as the API's detail says them; less those of
    `shown_by_fields`, which the page shows under their own field."""
    return " ".join(message for name, errors in form.errors.items() if name not in shown_by_fields
                    for message in errors)


def _requested(request, form: PredictionForm) -> PredictionJob | None:
    if not form.is_valid():
        return None
    return prediction_request(team=request.team, user=request.user, **form.request_kwargs())


def _completed_models(team):
    return team_models(team=team).filter(status="completed").order_by("-created", "-id")


@team_required
def prediction_new(request):
    """Predict with any of the team's models, or with a registry alias resolved now."""
    form = PredictionForm(team=request.team)
    if request.method == "POST":
        if not request.membership.can_edit:
            return forbidden(request, "Viewers cannot ask for predictions; ask an owner for the editor role.")
        form = PredictionForm(request.POST, request.FILES, team=request.team)
        job = _requested(request, form)
        if job is not None:
            messages.success(request, _queued(job))
            return redirect("prediction_detail", prediction_id=job.pk)
    return render(request, "predictions/new.html", {"form": form, "models": _completed_models(request.team),
                                                    "error": form_message(form, shown_by_fields=("reference", "file"))
                                                    if form.is_bound else ""},
                  status=400 if form.is_bound else 200)


def _queued(job) -> str:
    return f"Queued prediction {job.pk}: {job.rows} rows with {made_by(job.model, job.variant)}."


@require_POST
@editor_required
def model_predict(request, model_id: int):
    model = get_model_for_user(request, model_id)
    form = PredictionForm(request.POST, request.FILES, team=request.team, fixed_model=model)
    job = _requested(request, form)
    if job is None:
        messages.error(request, f"Batch prediction: {form_message(form)}")
        return redirect("model_detail", model_id=model.id)
    messages.success(request, _queued(job))
    return redirect("prediction_detail", prediction_id=job.pk)


@require_POST
@editor_required
def model_try(request, model_id: int):
    """"Try it": a small job whose predictions the model page shows when done (htmx swaps this
    answer into the box and it polls itself); without htmx, the job's page."""
    model = get_model_for_user(request, model_id)
    form = PredictionForm(request.POST, request.FILES, team=request.team, fixed_model=model, is_try=True)
    job = _requested(request, form)
    if request.htmx:
        if job is None:
            # 200: htmx swaps only successful answers into the box, and the refusal is what to show there.
            return render(request, "predictions/_try_error.html", {"error": form_message(form)})
        return render(request, "predictions/_live.html", _live_context(job))
    if job is None:
        messages.error(request, f"Try it: {form_message(form)}")
        return redirect("model_detail", model_id=model.id)
    return redirect("prediction_detail", prediction_id=job.pk)


@team_required
def prediction_detail(request, prediction_id: int):
    return render(request, "predictions/detail.html", _live_context(get_prediction_for_user(request, prediction_id)))


@team_required
def prediction_live(request, prediction_id: int):
    """The part of the job's page (and of the "Try it" box) htmx refreshes while it runs."""
    return render(request, "predictions/_live.html", _live_context(get_prediction_for_user(request, prediction_id)))


def _live_context(job) -> dict:
    return {"job": job, "queue_place": queue_place("predictions", job)}


@require_POST
@editor_required
def prediction_cancel_view(request, prediction_id: int):
    job = get_prediction_for_user(request, prediction_id)
    try:
        prediction_cancel(job=job)
    except PredictionCancelError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Prediction {job.pk} cancelled.")
    return redirect("prediction_detail", prediction_id=job.pk)


def prediction_file_response(job: PredictionJob, fmt: str):
    """The job's CSV or NPZ, streamed (the page and the API); 404 until it has one."""
    if fmt not in DOWNLOADS:
        raise Http404("Predictions download as csv or npz.")
    field, content_type = DOWNLOADS[fmt]
    artifact = getattr(job, field)
    if artifact is None:
        raise Http404("This prediction has no predictions to download yet.")
    response = StreamingHttpResponse(artifact_iter_chunks(artifact=artifact), content_type=content_type)
    response["Content-Length"] = str(artifact.size)
    response["Content-Disposition"] = f'attachment; filename="{artifact.filename}"'
    response["X-Content-SHA256"] = artifact.sha256
    return response


@team_required
def prediction_download(request, prediction_id: int, fmt: str):
    return prediction_file_response(get_prediction_for_user(request, prediction_id), fmt)
