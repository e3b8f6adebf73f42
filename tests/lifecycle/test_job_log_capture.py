"""The worker's log writer on PostgreSQL: while the database refuses its writes, samples wait (the newest
MAX_UNWRITTEN_SAMPLES of them) and printing goes on; once it takes them, what was dropped is said in
the log, and the stored log is the newest snapshot."""

import psutil
import pytest
from django.db import DatabaseError

from experiments.models import JobLog, JobSample
from workers.host import job_logs
from workers.host.job_logs import JobLogCapture
from workers.host.system_metrics import SystemSampler

pytestmark = pytest.mark.django_db(transaction=True)
LOG_ID = 987_654


def test_samples_wait_while_writes_fail_and_what_was_dropped_is_said(monkeypatch, settings):
    settings.SYSTEM_SAMPLE_SECONDS = 1
    monkeypatch.setattr(job_logs, "MAX_UNWRITTEN_SAMPLES", 3)
    capture = JobLogCapture(LOG_ID, SystemSampler(psutil.Process(), nvml=None))  # no row yet: every write fails
    for number in range(5):
        capture.bounded.write(f"line {number}\n")
        capture.next_sample = 0
        with pytest.raises(DatabaseError):
            capture.write()
    assert len(capture.samples) == 3 and capture.dropped_samples == 2

    JobLog.objects.create(pk=LOG_ID, kind="trial", job_id=1)  # the database takes writes again
    capture.write(running=False)
    log = JobLog.objects.get(pk=LOG_ID)
    assert JobSample.objects.filter(log=log).count() == 3 and not log.running
    text = log.text()
    assert "line 0" in text and "line 4" in text
    assert "2 system samples were dropped while the database did not take them" in text
