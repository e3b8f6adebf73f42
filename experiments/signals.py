"""Lifecycle events other areas react to without the lifecycle modules importing them; each receiver guards
itself, so a listener's error never undoes the event."""

from django.dispatch import Signal

# Sent inside the transaction that finished the model: model_pk, status (JobStatus), error.
model_finished = Signal()
# Sent inside the transaction that moved the study to COMPLETED (its lock held): study_id.
study_completed = Signal()
# Sent inside the transaction that recorded a completed or pruned trial: trial_pk, study_id.
trial_finished = Signal()
