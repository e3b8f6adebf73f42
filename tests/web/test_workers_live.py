"""The Workers page says what each worker's running trials and jobs use now, from each run's latest
system sample: CPU and memory summed per worker, and each GPU's figures, for every team's runs
alike (the fleet is shared) without naming another team's; a run that stopped writing is not counted."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from experiments.models import JobLog, Worker
from experiments.services.job_logs import job_log_open, job_samples_add

pytestmark = pytest.mark.django_db

GPU = {"index": 1, "utilization_percent": 87, "memory_used_bytes": 30 * 2**30, "memory_total_bytes": 80 * 2**30,
       "power_watts": 250.5, "temperature_c": 61}


def _run(worker: str, job_id: int, *samples: dict) -> int:
    log_id = job_log_open(kind="trial", job_id=job_id, attempt=1, worker=worker)
    now = timezone.now()
    job_samples_add(log_id=log_id, samples=[(now + timedelta(seconds=i), values) for i, values in enumerate(samples)])
    return log_id


def test_each_worker_shows_its_runs_latest_use_and_its_gpus(alice_client, acme_trial):
    Worker.objects.create(name="gpu1@h", hostname="h", pid=1, queues=["gpu"])
    Worker.objects.create(name="cpu1@h", hostname="h", pid=2, queues=["cpu"])
    _run("gpu1@h", acme_trial.pk, {"cpu_percent": 10.0, "rss_bytes": 2**30},
         {"cpu_percent": 95.0, "rss_bytes": 2 * 2**30, "gpus": [GPU]})
    _run("gpu1@h", 999_999, {"cpu_percent": 55.0, "rss_bytes": 2**30, "gpus": [{**GPU, "index": 0, "power_watts": 80}]})
    stale = _run("cpu1@h", 999_998, {"cpu_percent": 100.0, "rss_bytes": 2**30})
    JobLog.objects.filter(pk=stale).update(updated=timezone.now() - timedelta(minutes=10))  # its worker died

    page = alice_client.get(reverse("worker_list")).content.decode()
    gpu_row = page.split('data-worker="gpu1@h"')[1].split("</tr>")[0]
    assert "CPU 150 % · 3.0\xa0GB" in gpu_row and "(2 runs)" in gpu_row
    assert gpu_row.index("GPU 0: 87 %") < gpu_row.index("GPU 1: 87 % · 30.0\xa0GB of 80.0\xa0GB · 250.5 W · 61 °C")
    cpu_row = page.split('data-worker="cpu1@h"')[1].split("</tr>")[0]
    assert "CPU 100" not in cpu_row and '<td class="worker-live"><span class="muted">—</span></td>' in cpu_row


def test_a_gpu_worker_shows_its_trials_per_gpu_and_why(alice_client):
    Worker.objects.create(name="gpu1@h", hostname="h", pid=1, queues=["gpu-jax"], concurrency=4, packing={
        "setting": "auto", "trials_per_gpu": 2, "reason": "2 trials per GPU: 4 trials per GPU trained 1.07× as fast"})
    Worker.objects.create(name="gpu2@h", hostname="h", pid=2, queues=["gpu"], concurrency=2,
                          packing={"setting": "2", "trials_per_gpu": 2, "reason": "TUNEBOARD_TRIALS_PER_GPU=2"})
    Worker.objects.create(name="cpu1@h", hostname="h", pid=3, queues=["cpu"])
    page = alice_client.get(reverse("worker_list")).content.decode()
    row = page.split('data-worker="gpu1@h"')[1].split("</tr>")[0]
    assert "2 trials per GPU (auto: 2 trials per GPU: 4 trials per GPU trained 1.07× as fast)" in row
    fixed = page.split('data-worker="gpu2@h"')[1].split("</tr>")[0]
    assert "2 trials per GPU" in fixed and "auto" not in fixed
    assert "per GPU" not in page.split('data-worker="cpu1@h"')[1].split("</tr>")[0]
