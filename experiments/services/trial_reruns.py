"""Re-runs: a finished trial's configuration trained again with the same seed, settings and data
split, to see how close the result comes.

A re-run is a job (services/jobs.py, states in experiments/states.py): a request saves a QUEUED
row and sends its task on the study's queue; a worker claims it as a new attempt and every later
write names that attempt (the fence); the reaper queues a lost one again and re-sends one whose
task never arrived. It never touches the study's oracle or trials, so the tuner does not hear of
it and it costs the study's budget nothing."""

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from experiments.errors import TuneboardError
from experiments.models import Trial, TrialRerun, TrialRerunEpoch
from experiments.services.job_kinds import JOB_KINDS
from experiments.services.jobs import job_move, job_record_epoch, job_send
from experiments.states import JOB_ACTIVE, JobStatus
from experiments.tuning.reproducibility import trial_seed


class RerunRequestError(TuneboardError):
    """Why a re-run cannot be requested; str(exc) is shown to the user."""


def trial_rerun_request(*, trial: Trial, user) -> TrialRerun:
    """Queue a re-run of a completed trial; one at a time per trial."""
    if trial.status != Trial.Status.COMPLETED:
        raise RerunRequestError(f"Only a completed trial can be re-run; this one is "
                                f"{trial.get_status_display().lower()}.")
    with transaction.atomic():
        trial = Trial.objects.select_for_update().select_related("study").get(pk=trial.pk)  # numbers without gaps
        reruns = TrialRerun.objects.filter(trial=trial)
        if reruns.filter(status__in=JOB_ACTIVE).exists():
            raise RerunRequestError("A re-run of this trial is already queued or running; wait for it to finish.")
        number = (reruns.aggregate(n=Max("number"))["n"] or 0) + 1
        rerun = TrialRerun.objects.create(trial=trial, number=number, seed=trial_seed(trial), created_by=user)
        job_send(kind=JOB_KINDS["reruns"], row=rerun)
    return rerun


def rerun_record_epoch(*, rerun_pk: int, attempt: int, execution: int, epoch: int, metrics: dict) -> bool:
    """Store one epoch's metrics; False when this attempt no longer owns the re-run (stop)."""
    return job_record_epoch(
        kind=JOB_KINDS["reruns"], pk=rerun_pk, attempt=attempt, unique_fields=["rerun", "execution", "epoch"],
        row=TrialRerunEpoch(rerun_id=rerun_pk, execution=execution, epoch=epoch, metrics=metrics))


def rerun_complete(*, rerun_pk: int, attempt: int, score: float, best_epoch: int | None, metrics: dict,
                   compute: dict, environment: dict, duration_seconds: float) -> bool:
    """The result, once; False (and nothing written) when this attempt no longer owns the re-run."""
    return job_move(kind=JOB_KINDS["reruns"], pk=rerun_pk, target=JobStatus.COMPLETED, attempt=attempt, score=score,
                    best_epoch=best_epoch, metrics=metrics, compute=compute, environment=environment,
                    duration_seconds=duration_seconds, finished=timezone.now())
