"""Trials: the rows workers write while a study runs. Finished trials are immutable."""

from django.db.models import Count, Q
from django.utils import timezone

from experiments.models import Study, Trial, TrialEpoch


def trial_running_count(*, study: Study) -> int:
    return Trial.objects.filter(study=study, status=Trial.Status.RUNNING).count()


def trial_create_running(*, study: Study, trial_id: str, tuner_id: str, worker_host: str,
                         hyperparameters: dict, kt_state: dict, oracle_version: int, worker_name: str = "") -> Trial:
    counts = Trial.objects.filter(study=study).aggregate(
        started=Count("id"), attempts=Count("id", filter=Q(trial_id=trial_id))
    )
    now = timezone.now()
    return Trial.objects.create(
        study=study, trial_id=trial_id, number=counts["started"] + 1, attempt=counts["attempts"] + 1,
        status=Trial.Status.RUNNING, hyperparameters=hyperparameters, kt_state=kt_state,
        oracle_version=oracle_version, tuner_id=tuner_id, worker_host=worker_host, worker_name=worker_name,
        started=now, heartbeat=now,
    )


def trial_record_epoch(*, trial_pk: int, execution: int, epoch: int, metrics: dict) -> bool:
    """Store one epoch's metrics and bump the heartbeat. Returns False when the trial
    should stop (its study was cancelled, or the trial is no longer running)."""
    alive = Trial.objects.filter(
        pk=trial_pk, status=Trial.Status.RUNNING, study__status=Study.Status.RUNNING
    ).update(heartbeat=timezone.now())
    if alive:  # one INSERT ... ON CONFLICT: a re-reported epoch replaces the earlier row
        TrialEpoch.objects.bulk_create(
            [TrialEpoch(trial_id=trial_pk, execution=execution, epoch=epoch, metrics=metrics)],
            update_conflicts=True, unique_fields=["trial", "execution", "epoch"], update_fields=["metrics"],
        )
    return bool(alive)


def trial_heartbeat(*, trial_pk: int) -> bool:
    return bool(
        Trial.objects.filter(pk=trial_pk, status=Trial.Status.RUNNING).update(heartbeat=timezone.now())
    )


def _finish(trial: Trial, status: str, kt_state: dict, outcome, **fields) -> None:
    now = timezone.now()
    trial.status = status
    trial.kt_state = kt_state
    trial.oracle_version = trial.study.oracle_version + 1  # the version the caller is about to save
    trial.finished = now
    trial.duration_seconds = outcome.duration_seconds or (now - trial.started).total_seconds()
    for name, value in fields.items():
        setattr(trial, name, value)
    trial.save()


def trial_mark_completed(*, trial: Trial, kt_state: dict, outcome) -> None:
    _finish(trial, Trial.Status.COMPLETED, kt_state, outcome, score=outcome.score,
            best_epoch=None if outcome.best_step is None else outcome.best_step + 1,
            metrics=outcome.metrics, checkpoint_id=outcome.checkpoint_id)


def trial_mark_failed(*, trial: Trial, kt_state: dict, outcome) -> None:
    _finish(trial, Trial.Status.FAILED, kt_state, outcome, error=outcome.error or "The trial failed.")


def trial_mark_cancelled(*, trial: Trial, kt_state: dict, outcome) -> None:
    _finish(trial, Trial.Status.CANCELLED, kt_state, outcome,
            error="Stopped because the study was cancelled; it runs again if the study is resumed.")


def trial_mark_lost(*, trial: Trial, kt_state: dict, outcome) -> None:
    _finish(trial, Trial.Status.LOST, kt_state, outcome, error=outcome.error or "The worker running it stopped.")


def trial_stale(*, older_than) -> list[int]:
    return list(
        Trial.objects.filter(status=Trial.Status.RUNNING, heartbeat__lt=older_than).values_list("pk", flat=True)
    )


def study_complete_if_done(*, study: Study, oracle_done: bool = True, running: int | None = None) -> bool:
    """Mark a running study COMPLETED when the oracle has nothing left and no trial runs."""
    if not oracle_done or study.status != Study.Status.RUNNING:
        return False
    if running is None:
        running = trial_running_count(study=study)
    if running:
        return False
    Study.objects.filter(pk=study.pk, status=Study.Status.RUNNING).update(
        status=Study.Status.COMPLETED, finished=timezone.now(), message=""
    )
    study.status = Study.Status.COMPLETED
    return True


def study_fail_after_failures(*, study: Study, reason: str) -> None:
    errors = list(
        Trial.objects.filter(study=study, status=Trial.Status.FAILED)
        .order_by("-number").values_list("trial_id", "error")[: study.max_consecutive_failed_trials]
    )
    detail = "; ".join(f"trial {tid}: {err}" for tid, err in errors)
    Study.objects.filter(pk=study.pk).update(
        status=Study.Status.FAILED, finished=timezone.now(), message=f"{reason} Last errors — {detail}"
    )
    study.status = Study.Status.FAILED




class TrialNotesError(ValueError):
    pass


MAX_TAGS = 10
MAX_TAG_LENGTH = 30


def trial_annotate(*, trial: Trial, notes: str, tags: str) -> Trial:
    """Notes and comma-separated tags on a trial; results are untouched."""
    cleaned = []
    for tag in (t.strip().lower() for t in tags.split(",")):
        if not tag or tag in cleaned:
            continue
        if len(tag) > MAX_TAG_LENGTH:
            raise TrialNotesError(f"The tag {tag[:MAX_TAG_LENGTH]!r}… is longer than {MAX_TAG_LENGTH} characters.")
        cleaned.append(tag)
    if len(cleaned) > MAX_TAGS:
        raise TrialNotesError(f"A trial takes at most {MAX_TAGS} tags; you gave {len(cleaned)}.")
    if len(notes) > 5000:
        raise TrialNotesError("Notes are limited to 5,000 characters.")
    Trial.objects.filter(pk=trial.pk).update(notes=notes.strip(), tags=cleaned)
    trial.notes, trial.tags = notes.strip(), cleaned
    return trial
