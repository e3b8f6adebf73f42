"""The logs of a trial or job with their system samples, oldest run first. The caller has found the trial or job for the
user's team (views/access.py), so a log is never read by its id alone."""

from django.db.models import Prefetch

from experiments.models import JobLog, JobSample, TrainedModel, Trial


def job_logs(*, kind: str, job_id: int) -> list[JobLog]:
    """Each run's log with its system samples (`log.samples.all()`, oldest first)."""
    return list(JobLog.objects.filter(kind=kind, job_id=job_id).prefetch_related(
        Prefetch("samples", queryset=JobSample.objects.order_by("at", "pk"))))


def trial_logs(trial: Trial) -> list[JobLog]:
    return job_logs(kind="trial", job_id=trial.pk)


def model_logs(model: TrainedModel) -> list[JobLog]:
    return job_logs(kind="models", job_id=model.pk)
