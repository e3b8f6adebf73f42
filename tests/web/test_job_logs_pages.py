"""The Logs card of the trial and model pages: empty until a worker writes, a long log shown with
the marker of what was cut, polled only while a run writes; and the purge by age."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from experiments.models import JobLog
from experiments.services.job_logs import (
    LogSnapshot,
    job_log_open,
    job_log_write,
    job_logs_purge,
    job_samples_add,
)

pytestmark = pytest.mark.django_db


def test_a_trial_page_shows_its_runs_logs_with_the_cut_marker_and_polls_only_while_one_runs(
        alice_client, acme_trial):
    url = reverse("trial_detail", args=[acme_trial.study_id, acme_trial.pk])
    assert 'id="logs-empty"' in alice_client.get(url).content.decode()

    first = job_log_open(kind="trial", job_id=acme_trial.pk, attempt=1)
    job_log_write(log_id=first, running=False, snapshot=LogSnapshot(
        head="10:00:00 first <b>line</b>\n", tail="10:05:00 last line\n", lines=900, cut_lines=898, cut_bytes=40_000))
    second = job_log_open(kind="trial", job_id=acme_trial.pk, attempt=1)
    job_log_write(log_id=second, snapshot=LogSnapshot(head="10:06:00 again\n", tail="", lines=1, cut_lines=0,
                                                      cut_bytes=0))
    page = alice_client.get(url).content.decode()
    assert "first &lt;b&gt;line&lt;/b&gt;" in page, "printed text is escaped"
    assert "898 lines (40,000 bytes) cut here" in page and "10:05:00 last line" in page
    assert 'id="log-2"' in page and "still running" in page
    assert reverse("trial_logs_live", args=[acme_trial.study_id, acme_trial.pk]) in page  # polled while it runs

    JobLog.objects.filter(pk=second).update(running=False)
    live = alice_client.get(reverse("trial_logs_live", args=[acme_trial.study_id, acme_trial.pk])).content.decode()
    assert "10:06:00 again" in live and "hx-trigger" not in live
    text = alice_client.get(reverse("trial_logs_download", args=[acme_trial.study_id, acme_trial.pk])).content.decode()
    assert text.index("===== run 1") < text.index("10:05:00 last line") < text.index("===== run 2")


def test_a_model_page_has_its_logs_card_with_the_system_series(alice_client, acme_model):
    log_id = job_log_open(kind="models", job_id=acme_model.pk, attempt=1)
    job_log_write(log_id=log_id, running=False, snapshot=LogSnapshot(
        head="10:00:00 INFO workers.training.callbacks: epoch 1: loss 0.5\n", tail="", lines=1, cut_lines=0,
        cut_bytes=0))
    now = timezone.now()
    gpu = {"index": 0, "utilization_percent": 97, "memory_used_bytes": 2**30, "memory_total_bytes": 2**34}
    job_samples_add(log_id=log_id, samples=[
        (now, {"cpu_percent": 50.0, "rss_bytes": 300 * 2**20, "load1": 1.0, "gpus": [gpu]}),
        (now + timedelta(seconds=5), {"cpu_percent": 150.0, "rss_bytes": 400 * 2**20, "load1": 2.0,
                                      "gpus": [{**gpu, "utilization_percent": 12}]})])
    page = alice_client.get(reverse("model_detail", args=[acme_model.pk])).content.decode()
    assert "epoch 1: loss 0.5" in page
    assert "CPU: 150.0 % of a core" in page and "Memory (RSS): 400.0 MiB" in page
    assert "GPU 0 utilisation: 12.0 %" in page and "(highest 97.0)" in page and "GPU 0 power" not in page
    assert page.count("<polyline") == 5
    assert "Input-bound" not in page  # its GPU was busy on average (55 %)


def test_a_gpu_that_mostly_waited_on_a_busy_input_thread_is_called_out(alice_client, acme_trial):
    log_id = job_log_open(kind="trial", job_id=acme_trial.pk, attempt=1)
    job_log_write(log_id=log_id, running=False, snapshot=LogSnapshot(head="", tail="", lines=0, cut_lines=0,
                                                                     cut_bytes=0))
    now = timezone.now()
    job_samples_add(log_id=log_id, samples=[
        (now + timedelta(seconds=5 * i), {
            "cpu_percent": 99.0, "rss_bytes": 2**30, "load1": 1.0, "samples_per_second": 1000.0 + i,
            "gpus": [{"index": 0, "utilization_percent": busy}],
            "device_memory": [{"device": "cuda:0", "bytes_in_use": (i + 1) * 2**30}]})
        for i, busy in enumerate([30, 50, 40, 40])])
    page = alice_client.get(reverse("trial_detail", args=[acme_trial.study_id, acme_trial.pk])).content.decode()
    assert ("Input-bound: the GPU waited 60 % of the time while the process kept a core 99 % busy; try a larger "
            "batch or more steps per execution.") in page
    assert "Training speed: 1003.0 samples/s" in page
    assert "cuda:0 memory (backend): 4096.0 MiB" in page


def test_logs_not_written_to_for_the_retention_are_purged(settings, acme_trial):
    settings.JOB_LOG_DAYS = 30
    old = job_log_open(kind="trial", job_id=acme_trial.pk, attempt=1)
    recent = job_log_open(kind="trial", job_id=acme_trial.pk, attempt=2)
    JobLog.objects.filter(pk=old).update(updated=timezone.now() - timedelta(days=31))
    assert job_logs_purge() == 1
    assert list(JobLog.objects.values_list("pk", flat=True)) == [recent]
