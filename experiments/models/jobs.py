"""The columns every job a worker claims besides trials shares, so experiments/services/jobs.py
moves all five kinds (trained models, re-runs, conversions, serving exports, batch predictions) alike."""

from django.db import models
from django.utils import timezone

from experiments.states import JobStatus


class Job(models.Model):
    Status = JobStatus

    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    error = models.TextField(blank=True)
    environment = models.JSONField(default=dict, blank=True)  # as Trial.environment
    # Each claim is a new attempt; every write of the worker carries it (the fence).
    attempts = models.PositiveIntegerField(default=0)
    # Attempts handed back by a worker shutting down: not the job's fault, so not counted as lost.
    releases = models.PositiveIntegerField(default=0)
    worker_host = models.CharField(max_length=200, blank=True)
    heartbeat = models.DateTimeField(null=True, blank=True)
    # When its task was last sent to the broker: a QUEUED job unclaimed for long is re-sent.
    last_sent = models.DateTimeField(null=True, blank=True)
    resends = models.PositiveIntegerField(default=0)
    # Why a QUEUED job was not claimed when a worker offered it a slot (its team's quota on the
    # queue); cleared by the claim that takes it.
    queue_wait = models.TextField(blank=True)
    duration_seconds = models.FloatField(null=True, blank=True)
    # What its runs held, summed over its attempts (each one held its devices): wall time × devices,
    # and their kind ("cpu", "gpu", "tpu"), as its worker reported at the end of each run.
    device_seconds = models.FloatField(null=True, blank=True)
    device_kind = models.CharField(max_length=10, blank=True)
    created = models.DateTimeField(default=timezone.now)
    started = models.DateTimeField(null=True, blank=True)  # its first attempt's start
    # Its current (or last) attempt's start and the devices its worker child holds for it (as the
    # child will record them): a running job's device time so far, for the quotas.
    attempt_started = models.DateTimeField(null=True, blank=True)
    attempt_devices = models.PositiveIntegerField(default=1)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True

    @property
    def is_active(self) -> bool:
        return self.status in (self.Status.QUEUED, self.Status.RUNNING)
