"""The states of every job Tuneboard runs and the moves between them, in one place: the lifecycle services make
only these moves, each a conditional UPDATE on the state it leaves (docs/design/job-lifecycle.md)."""

from django.db import models


class StudyStatus(models.TextChoices):
    CREATED = "created", "Not started"
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    CANCELLED = "cancelled", "Cancelled"
    FAILED = "failed", "Failed"


class TrialStatus(models.TextChoices):
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    LOST = "lost", "Lost"
    # Stopped early by the study's pruner (experiments/tuning/pruners.py): a result, not a failure.
    PRUNED = "pruned", "Pruned"


class JobStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


STUDY_MOVES = {
    StudyStatus.CREATED: {StudyStatus.RUNNING},
    # A study ends when its oracle has nothing left, a user cancels it, or too many trials
    # in a row fail; a cancelled or failed study may be resumed.
    StudyStatus.RUNNING: {StudyStatus.COMPLETED, StudyStatus.CANCELLED, StudyStatus.FAILED},
    StudyStatus.CANCELLED: {StudyStatus.RUNNING},
    StudyStatus.FAILED: {StudyStatus.RUNNING},
    StudyStatus.COMPLETED: {StudyStatus.RUNNING},  # extended (services/study_extensions.py) only
}

TRIAL_MOVES = {
    # A trial row is created RUNNING by a claim and finished once; its results never change.
    TrialStatus.RUNNING: {TrialStatus.COMPLETED, TrialStatus.FAILED, TrialStatus.CANCELLED, TrialStatus.LOST,
                          TrialStatus.PRUNED},
    TrialStatus.COMPLETED: set(),
    TrialStatus.PRUNED: set(),
    TrialStatus.FAILED: set(),
    TrialStatus.CANCELLED: set(),
    TrialStatus.LOST: set(),
}

JOB_MOVES = {
    JobStatus.QUEUED: {JobStatus.RUNNING, JobStatus.CANCELLED, JobStatus.FAILED},
    # RUNNING -> QUEUED: its worker stopped heartbeating and the reaper queues it again
    # (the next claim is a new attempt; the old worker's writes are refused from then on).
    JobStatus.RUNNING: {JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.QUEUED},
    JobStatus.COMPLETED: set(),
    JobStatus.FAILED: set(),
    JobStatus.CANCELLED: set(),
}

JOB_ACTIVE = (JobStatus.QUEUED, JobStatus.RUNNING)


def sources(moves: dict, target) -> list:
    """The states a row may leave to reach `target`: the filter of a conditional UPDATE."""
    return [state for state, targets in moves.items() if target in targets]


class DeliveryStatus(models.TextChoices):
    # PENDING covers "waiting for a retry": attempts and next_attempt say which.
    PENDING = "pending", "Pending"
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed"
