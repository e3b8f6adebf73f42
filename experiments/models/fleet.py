"""Worker hosts, as their heartbeats report them."""

from django.conf import settings
from django.db import models
from django.utils import timezone


class Worker(models.Model):
    """A Celery worker (one node, `concurrency` child processes); it heartbeats while alive."""

    name = models.CharField(max_length=200, unique=True)
    hostname = models.CharField(max_length=200)
    pid = models.IntegerField()
    queues = models.JSONField(default=list)
    # The Keras backend its children train with (a worker runs one: KERAS_BACKEND).
    backend = models.CharField(max_length=10, blank=True)
    devices = models.JSONField(default=list)
    concurrency = models.PositiveIntegerField(default=1)
    # Trials per GPU on a GPU host ({"setting": "2" or "auto", "trials_per_gpu": n, "reason": ...}), {} elsewhere.
    packing = models.JSONField(default=dict, blank=True)
    versions = models.JSONField(default=dict)
    started = models.DateTimeField(default=timezone.now)
    last_heartbeat = models.DateTimeField(default=timezone.now)
    stopped = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["hostname", "name"]

    def __str__(self) -> str:
        return self.name

    def is_alive(self, now=None) -> bool:

        now = now or timezone.now()
        stale_after = 3 * settings.WORKER_HEARTBEAT_SECONDS
        return self.stopped is None and (now - self.last_heartbeat).total_seconds() < stale_after


class TeamQueuePolicy(models.Model):
    """What a site admin set for one team on one accelerator queue: its weight in the fair share of
    the queue's slots and its quotas (none: unlimited). A team without a row weighs 1."""

    team = models.ForeignKey("experiments.Team", on_delete=models.CASCADE, related_name="queue_policies")
    queue = models.CharField(max_length=3, choices=[("cpu", "CPU"), ("gpu", "GPU"), ("tpu", "TPU")])
    weight = models.FloatField(default=1.0)
    max_concurrent = models.PositiveIntegerField(null=True, blank=True)
    device_hours_per_month = models.FloatField(null=True, blank=True)
    updated = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["queue", "team__name"]
        constraints = [models.UniqueConstraint(fields=["team", "queue"], name="one_policy_per_team_queue")]

    def __str__(self) -> str:
        return f"{self.team} on {self.queue}"
