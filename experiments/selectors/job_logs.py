"""The logs of a trial or job, oldest run first, with their system samples when asked. The caller has found the
trial or job for the user's team (views/access.py), so a log is never read by its id alone."""

from experiments.models import JobLog, JobSample, TrainedModel, Trial


def job_logs(*, kind: str, job_id: int, samples: bool = False) -> list[JobLog]:
    """Each run's log; with `samples`, each also carries `sample_rows`: its system samples as plain
    {"at", "values"} dicts, oldest first (one query for all runs; no model instances, so a page of
    a thousand samples leaves no cyclic garbage behind for the collector)."""
    logs = list(JobLog.objects.filter(kind=kind, job_id=job_id))
    if samples:
        by_log: dict[int, list[dict]] = {log.pk: [] for log in logs}
        rows = JobSample.objects.filter(log_id__in=by_log).order_by("log_id", "at", "pk").values("log_id", "at",
                                                                                                  "values")
        for row in rows:
            by_log[row.pop("log_id")].append(row)
        for log in logs:
            log.sample_rows = by_log[log.pk]
    return logs


def trial_logs(trial: Trial, *, samples: bool = False) -> list[JobLog]:
    return job_logs(kind="trial", job_id=trial.pk, samples=samples)


def model_logs(model: TrainedModel, *, samples: bool = False) -> list[JobLog]:
    return job_logs(kind="models", job_id=model.pk, samples=samples)
