"""The Logs card of the trial and model pages, polled while a run writes, and its download."""

from django.conf import settings
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse

from experiments.presentation.system_series import input_bound, system_series
from experiments.selectors.job_logs import model_logs, trial_logs
from experiments.views.access import get_model_for_user, get_trial_for_user, team_required


def logs_context(logs: list, *, live_url: str, download_url: str) -> dict:
    for entry in logs:
        entry.series, entry.input_bound = system_series(entry.sample_rows), input_bound(entry.sample_rows)
    return {"logs": logs, "logs_running": any(entry.running for entry in logs), "logs_url": live_url,
            "download_url": download_url, "log_days": settings.JOB_LOG_DAYS}


ERROR_TAIL_LINES = 20


def trial_logs_context(trial) -> dict:
    args = [trial.study_id, trial.pk]
    context = logs_context(trial_logs(trial, samples=True), live_url=reverse("trial_logs_live", args=args),
                           download_url=reverse("trial_logs_download", args=args))
    # A failed trial's last lines (its traceback) beside its reason, without opening the log.
    logs = context["logs"]
    failed = trial.status in (trial.Status.FAILED, trial.Status.LOST) and logs and not logs[-1].running
    context["error_tail"] = "\n".join(logs[-1].text().splitlines()[-ERROR_TAIL_LINES:]) if failed else ""
    return context


def model_logs_context(model) -> dict:
    return logs_context(model_logs(model, samples=True), live_url=reverse("model_logs_live", args=[model.pk]),
                        download_url=reverse("model_logs_download", args=[model.pk]))


def _text_download(logs: list, filename: str) -> HttpResponse:
    text = "".join(f"===== run {number} (attempt {entry.attempt}) =====\n{entry.text()}"
                   for number, entry in enumerate(logs, start=1))
    response = HttpResponse(text, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@team_required
def trial_logs_live(request, study_id: int, trial_pk: int):
    return render(request, "_job_logs.html", trial_logs_context(get_trial_for_user(request, study_id, trial_pk)))


@team_required
def trial_logs_download(request, study_id: int, trial_pk: int):
    trial = get_trial_for_user(request, study_id, trial_pk)
    return _text_download(trial_logs(trial), f"study-{study_id}-trial-{trial.number}-logs.txt")


@team_required
def model_logs_live(request, model_id: int):
    return render(request, "_job_logs.html", model_logs_context(get_model_for_user(request, model_id)))


@team_required
def model_logs_download(request, model_id: int):
    return _text_download(model_logs(get_model_for_user(request, model_id)), f"model-{model_id}-logs.txt")
