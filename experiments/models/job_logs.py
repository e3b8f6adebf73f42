"""What a job printed while it ran: one row per run of a trial or job (an attempt, or a run
again after its worker handed it back), bounded to its first and last lines (the worker keeps
head and tail and counts what it cut), written by the worker from a thread while it runs."""

from django.db import models
from django.utils import timezone


class JobLog(models.Model):
    # "trial" or a JOB_KINDS key ("models", "reruns", ...); job_id is that row's pk. No foreign key: it would take six
    # tables' worth; reads go through the parent, found for the user's team first (other teams
    # get a 404), and the purge by age (TUNEBOARD_JOB_LOG_DAYS) removes what outlived its parent.
    kind = models.CharField(max_length=20)
    job_id = models.PositiveBigIntegerField()
    attempt = models.PositiveIntegerField(default=1)
    # The Celery node running it ("gpu1@host"): the Workers page shows what each worker's runs use now.
    worker = models.CharField(max_length=200, blank=True)
    head = models.TextField(blank=True)
    tail = models.TextField(blank=True)
    # What fell between head and tail: the reader shows a marker with these counts.
    cut_lines = models.PositiveIntegerField(default=0)
    cut_bytes = models.PositiveBigIntegerField(default=0)
    lines = models.PositiveIntegerField(default=0)
    running = models.BooleanField(default=True)
    started = models.DateTimeField(default=timezone.now)
    updated = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        indexes = [models.Index(fields=["kind", "job_id"], name="job_log_of_a_job")]
        ordering = ["started", "pk"]

    def text(self) -> str:
        """Head, the marker of what was cut, tail: the whole log as a person reads it."""
        if not self.cut_lines:
            return self.head + self.tail
        marker = (f"[... {self.cut_lines} lines ({self.cut_bytes:,} bytes) cut here: "
                  "the first and last lines are kept ...]\n")
        return self.head + marker + self.tail


class JobSample(models.Model):
    """What the worker measured of one run every TUNEBOARD_SYSTEM_SAMPLE_SECONDS: its process's CPU %
    and RSS, the host's load, and per GPU it uses (NVML) utilisation, memory, power and temperature.
    A figure the host cannot give is absent from `values`, never zero."""

    log = models.ForeignKey(JobLog, on_delete=models.CASCADE, related_name="samples")
    at = models.DateTimeField()
    values = models.JSONField(default=dict)

    class Meta:
        ordering = ["at", "pk"]
