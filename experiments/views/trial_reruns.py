"""Re-running a finished trial, and the part of the trial page that shows how close re-runs came."""

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRefresh

from experiments.models import Trial, TrialRerun
from experiments.selectors.fleet import queue_has_live_worker
from experiments.selectors.trial_reruns import trial_reruns
from experiments.services.trial_reruns import RerunRequestError, trial_rerun_request
from experiments.tuning.reproducibility import inputs_changed_since
from experiments.views.access import editor_required, get_trial_for_user, team_required


def reruns_context(trial: Trial) -> dict:
    """What the trial page's re-runs part shows (the chart takes `charted` beside the trial's curves)."""
    reruns = trial_reruns(trial=trial)
    waiting = any(r.status == TrialRerun.Status.QUEUED for r in reruns)
    return {
        "trial": trial, "study": trial.study, "reruns": reruns,
        "reruns_active": any(r.is_active for r in reruns),
        "rerun_without_worker": waiting and not queue_has_live_worker(queue=trial.study.task_queue),
        "can_rerun": trial.status == Trial.Status.COMPLETED,
        "inputs_changed": inputs_changed_since(trial=trial, dataset=trial.study.dataset),
        "charted": [r for r in reversed(reruns) if r.status in (TrialRerun.Status.COMPLETED, TrialRerun.Status.RUNNING)
                    and r.epoch_rows],
    }


@require_POST
@editor_required
def trial_rerun_view(request, study_id: int, trial_pk: int):
    trial = get_trial_for_user(request, study_id, trial_pk)
    try:
        rerun = trial_rerun_request(trial=trial, user=request.user)
    except RerunRequestError as exc:
        messages.error(request, str(exc))
    else:
        changed = " ".join(inputs_changed_since(trial=trial, dataset=trial.study.dataset))
        messages.success(request, f"Re-run {rerun.number} queued on the {trial.study.queue} queue with the trial's "
                         f"seed ({rerun.seed}), settings and data split; the tuner does not hear of it and the study's "
                         f"budget is untouched.{' ' + changed if changed else ''}")
    return redirect(reverse("trial_detail", args=[study_id, trial.pk]) + "#reruns")


@team_required
def trial_reruns_live(request, study_id: int, trial_pk: int):
    """The re-runs part, polled by htmx while one is queued or running; when the last one ends
    the page reloads, so the comparison and the chart with both curves appear."""
    context = reruns_context(get_trial_for_user(request, study_id, trial_pk))
    if request.htmx and not context["reruns_active"]:
        return HttpResponseClientRefresh()
    return render(request, "studies/_reruns.html", context)
