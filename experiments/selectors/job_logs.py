"""The logs of a trial or job, oldest run first. The caller has found the trial or job for the
user's team (views/access.py), so a log is never read by its id alone."""

from experiments.models import JobLog, TrainedModel, Trial


def job_logs(*, kind: str, job_id: int) -> list[JobLog]:
    return list(JobLog.objects.filter(kind=kind, job_id=job_id))


def trial_logs(trial: Trial) -> list[JobLog]:
    return job_logs(kind="trial", job_id=trial.pk)


def model_logs(model: TrainedModel) -> list[JobLog]:
    return job_logs(kind="models", job_id=model.pk)
