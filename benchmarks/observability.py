"""What a run's log and system samples cost its training, what they store, and how fast they read back.

    python -m benchmarks.observability

Training (in this process, as a worker child trains; TensorFlow on 1 thread): the same small
MLP on scikit-learn's digits, EPOCHS epochs at batch 32, one log line an epoch, run ROUNDS times
with the capture on (workers.host.job_logs.job_log: stdout/stderr tee, log handler, the writer
thread flushing to PostgreSQL every second and taking a system sample every second, stricter
than the shipped 2 s and 5 s) and ROUNDS times off, the two taking turns first. Each run's
samples/s is rows × epochs / wall time of `fit`; the figure is the median of the per-round
on / off ratios (target >= 0.98). A print storm (STORM_MB of 100-byte lines, one print() each, from a batch hook)
is run the same way, capture on and off, and its stored log is checked for the cut marker. The
four arms run again on trials six times as long (LONG_ROUNDS rounds): the `long_` figures.
Stored bytes per trial-minute: the quiet runs' log text and sample JSON as PostgreSQL stores them.

Reading (first, before this process loads TensorFlow, which a web process never does): a trial
with 10,000 log lines (as the bounded writer keeps them) and 1,000 samples; its page, the live
logs card, and the API's logs and system metrics, through Django's whole request path,
TUNEBOARD_BENCH_REQUESTS (default 30) requests each after two warm-ups (the measure functions of
benchmarks.pages and benchmarks.api), at steady state (tables analysed, the seeding's garbage
frozen out of the collector); target p95 <= 100 ms.

Prints one JSON object as its last line and writes benchmarks/results/observability.json.
"""

import contextlib
import gc
import io
import json
import os
import statistics
import sys
import time

from benchmarks.api import REQUESTS as api_requests
from benchmarks.api import measure as api_measure
from benchmarks.harness import RESULTS, setup_django
from benchmarks.pages import measure as page_measure

EPOCHS = int(os.environ.get("TUNEBOARD_BENCH_EPOCHS", "60"))
ROUNDS = int(os.environ.get("TUNEBOARD_BENCH_ROUNDS", "7"))
# The same arms on trials six times as long (about half a minute here): a storm's fixed cost over a longer trial.
LONG_EPOCHS = 6 * EPOCHS
LONG_ROUNDS = int(os.environ.get("TUNEBOARD_BENCH_LONG_ROUNDS", "3"))
STORM_MB = 50
BATCH = 32


def _data():
    import numpy as np
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    return (x / 16.0).astype("float32"), y.astype("int32"), np


def _model(keras):
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(256, activation="relu"),
                              keras.layers.Dense(256, activation="relu"), keras.layers.Dense(10)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


def _epoch_line(keras, logger):
    """One log line an epoch, as a trial's EpochReport writes it (on and off alike)."""

    class EpochLine(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            logger.info("epoch %d: loss %.4g", epoch + 1, (logs or {}).get("loss", 0.0))

    return EpochLine()


def _storm(keras, total_bytes: int, batches: int):
    """`total_bytes` of 100-byte lines over the run, each its own print() as a chatty loop writes them."""
    line = "x" * 99
    per_batch = max(1, total_bytes // batches // (len(line) + 1))

    class Storm(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            for _ in range(per_batch):
                print(line)

    return Storm()


def _train_once(keras, x, y, *, epochs: int, capture: bool, log_id_for, storm: bool, logger) -> dict:
    from workers.host.job_logs import job_log

    model = _model(keras)
    batches = epochs * -(-len(x) // BATCH)
    callbacks = [_epoch_line(keras, logger)] + ([_storm(keras, STORM_MB * 2**20, batches)] if storm else [])
    context = job_log(kind="trial", job_id=log_id_for(), attempt=1) if capture else contextlib.nullcontext()
    started = time.perf_counter()
    with context:
        model.fit(x, y, batch_size=BATCH, epochs=epochs, callbacks=callbacks, verbose=0)
    seconds = time.perf_counter() - started
    return {"samples_per_second": len(x) * epochs / seconds, "seconds": seconds}


def tee_cost() -> dict:
    """The training thread's own cost of a print storm, apart from any training: STORM_MB of
    100-byte lines, one print() each, into a null stream with and without the log's tee."""
    from workers.host.job_logs import BoundedLog, _Tee

    lines, line = STORM_MB * 2**20 // 100, "x" * 99
    null = open(os.devnull, "w")  # noqa: SIM115 - closed below
    seconds = {}
    for side in ("off", "on", "off", "on"):
        stream = _Tee(null, BoundedLog(64 * 1024, 192 * 1024)) if side == "on" else null
        started = time.perf_counter()
        for _ in range(lines):
            print(line, file=stream)
        seconds.setdefault(side, []).append(time.perf_counter() - started)
    null.close()
    added = min(seconds["on"]) - min(seconds["off"])
    return {"storm_lines": lines, "storm_print_seconds_without_tee": round(min(seconds["off"]), 3),
            "storm_print_seconds_with_tee": round(min(seconds["on"]), 3),
            "storm_tee_seconds_added": round(added, 3), "tee_us_per_line": round(added / lines * 1e6, 3)}


def _arms(train, rounds: int) -> dict:
    """Each round: quiet on and off, storm on and off, the sides taking turns first."""
    arms = {name: [] for name in ("quiet_on", "quiet_off", "storm_on", "storm_off")}
    for round_ in range(rounds):
        order = [("on", True), ("off", False)] if round_ % 2 == 0 else [("off", False), ("on", True)]
        for kind, storm in (("quiet", False), ("storm", True)):
            for side, capture in order:
                arms[f"{kind}_{side}"].append(train(capture=capture, storm=storm))
    return arms


def _figures(arms: dict, prefix: str = "") -> dict:
    result = {}
    for kind in ("quiet", "storm"):
        ratios = [on["samples_per_second"] / off["samples_per_second"]
                  for on, off in zip(arms[f"{kind}_on"], arms[f"{kind}_off"], strict=True)]
        result[f"{prefix}{kind}_ratios_on_vs_off"] = [round(r, 3) for r in ratios]
        for side in ("on", "off"):
            result[f"{prefix}{kind}_samples_per_second_{side}_median"] = round(
                statistics.median(a["samples_per_second"] for a in arms[f"{kind}_{side}"]), 1)
        result[f"{prefix}{kind}_seconds_per_run_median"] = round(
            statistics.median(a["seconds"] for a in arms[f"{kind}_on"]), 2)
    result[f"{prefix}throughput_ratio_on_vs_off"] = round(statistics.median(result[f"{prefix}quiet_ratios_on_vs_off"]),
                                                          3)
    result[f"{prefix}storm_throughput_ratio_on_vs_off"] = round(
        statistics.median(result[f"{prefix}storm_ratios_on_vs_off"]), 3)
    # The storm figure: a trial with a 50 MB storm (captured) against a quiet trial (captured).
    result[f"{prefix}storm_vs_quiet_with_capture"] = round(
        result[f"{prefix}storm_samples_per_second_on_median"] / result[f"{prefix}quiet_samples_per_second_on_median"],
        3)
    return result


def training_arms() -> dict:
    import logging

    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import keras
    import tensorflow as tf
    from django.conf import settings

    from experiments.models import JobLog

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    settings.JOB_LOG_FLUSH_SECONDS = settings.SYSTEM_SAMPLE_SECONDS = 1
    logger = logging.getLogger("workers.benchmark")
    logger.setLevel(logging.INFO)
    x, y, _ = _data()
    ids = iter(range(1, 10_000))
    first_pk = JobLog.objects.order_by("-pk").values_list("pk", flat=True).first() or 0  # logs before the arms

    def trainer(epochs: int):
        def train(*, capture: bool, storm: bool) -> dict:
            return _train_once(keras, x, y, epochs=epochs, capture=capture, storm=storm,
                               log_id_for=lambda: next(ids), logger=logger)
        return train

    real_stdout = sys.stdout
    sys.stdout = io.TextIOWrapper(open(os.devnull, "wb"), write_through=True)  # a worker's stdout: not a terminal
    try:
        trainer(EPOCHS)(capture=False, storm=False)  # warm-up
        short = _arms(trainer(EPOCHS), ROUNDS)
        stored = _stored(JobLog, short, first_pk)
        long = _arms(trainer(LONG_EPOCHS), LONG_ROUNDS) if LONG_ROUNDS else None
    finally:
        sys.stdout = real_stdout
    result = {"epochs": EPOCHS, "rounds": ROUNDS, "rows": len(x), "batch_size": BATCH, "storm_mb": STORM_MB,
              "flush_seconds": 1, "sample_seconds": 1, **_figures(short), **stored}
    if long is not None:
        result.update({"long_epochs": LONG_EPOCHS, "long_rounds": LONG_ROUNDS, **_figures(long, "long_")})
    return result


def _stored(job_log_table, arms, first_pk: int) -> dict:
    from django.db import connection

    from experiments.models import JobSample

    logs = list(job_log_table.objects.filter(pk__gt=first_pk).order_by("pk"))
    # The runs went quiet, storm, quiet, storm ... per round, each pair in the round's order: the
    # quiet captured runs are those whose log holds no storm line.
    quiet = [log for log in logs if "xxxxxxxx" not in log.head]
    storm = [log for log in logs if "xxxxxxxx" in log.head]
    with connection.cursor() as cursor:
        cursor.execute("SELECT coalesce(sum(octet_length(head) + octet_length(tail)), 0) FROM experiments_joblog "
                       "WHERE id = ANY(%s)", [[log.pk for log in quiet]])
        text_bytes = cursor.fetchone()[0]
        cursor.execute("SELECT coalesce(sum(octet_length(values::text)), 0), count(*) FROM experiments_jobsample "
                       "WHERE log_id = ANY(%s)", [[log.pk for log in quiet]])
        sample_bytes, samples = cursor.fetchone()
    minutes = sum(run["seconds"] for run in arms["quiet_on"]) / 60
    worst = max(storm, key=lambda log: log.cut_bytes)
    return {
        "bytes_per_trial_minute": round((text_bytes + sample_bytes) / minutes),
        "log_bytes_per_trial_minute": round(text_bytes / minutes),
        "sample_bytes_per_trial_minute": round(sample_bytes / minutes),
        "samples_per_trial_minute": round(samples / minutes, 1),
        "storm_stored_kb": round((len(worst.head.encode()) + len(worst.tail.encode())) / 1024, 1),
        "storm_cut_mb": round(worst.cut_bytes / 2**20, 1),
        "storm_cut_marker_shown": "cut here" in worst.text(),
        "storm_logs_checked": len(storm),
        "sample_rows_checked": JobSample.objects.filter(log__pk__gt=first_pk).count(),
    }


def _seed_trial():
    from datetime import timedelta

    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from experiments.models import Study, Trial
    from experiments.services.api_tokens import api_token_create
    from experiments.services.datasets import dataset_create_bundled
    from experiments.services.job_logs import job_log_open, job_log_write, job_samples_add
    from experiments.services.studies import study_create
    from experiments.services.teams import team_create
    from experiments.tuning.hypermodel_catalog import DENSE_DEFAULT_SPACE
    from workers.host.job_logs import BoundedLog

    user = get_user_model().objects.create_user("observability", password="x" * 12)
    team = team_create(name="observability", owner=user)
    dataset = dataset_create_bundled(team=team, user=user, bundled_name="digits")
    study = study_create(team=team, user=user, dataset=dataset, name="logged", hypermodel="dense",
                         search_space=DENSE_DEFAULT_SPACE, tuner="random", objective_metric="val_accuracy",
                         objective_direction="max", max_trials=1)
    Study.objects.filter(pk=study.pk).update(status=Study.Status.COMPLETED, started=timezone.now(),
                                             finished=timezone.now())
    trial = Trial.objects.create(study=study, trial_id="00000", number=1, status=Trial.Status.COMPLETED,
                                 hyperparameters={"units": 64}, score=0.9, duration_seconds=5000.0)
    bounded = BoundedLog(64 * 1024, 192 * 1024)
    for i in range(10_000):
        bounded.write(f"INFO workers.training.callbacks: epoch {i + 1}: loss {1 / (i + 1):.4g}, accuracy 0.9\n")
    log_id = job_log_open(kind="trial", job_id=trial.pk, attempt=1)
    job_log_write(log_id=log_id, snapshot=bounded.snapshot(), running=False)
    now = timezone.now()
    job_samples_add(log_id=log_id, samples=[
        (now + timedelta(seconds=5 * i),
         {"cpu_percent": 95.0, "rss_bytes": 2**30 + i, "load1": 1.5, "samples_per_second": 5000.0 + i,
          "gpus": [{"index": 0, "utilization_percent": 60 + i % 40, "memory_used_bytes": 2**33,
                    "memory_total_bytes": 2**37, "power_watts": 300.0, "temperature_c": 60}]})
        for i in range(1_000)])
    _, token = api_token_create(user=user, name="benchmark", team_id=team.id, role="owner")
    return user, token, study, trial


def reading() -> dict:
    from django.db import connection
    from django.test import Client
    from django.test.utils import setup_test_environment
    from django.urls import reverse

    setup_test_environment()
    user, token, study, trial = _seed_trial()
    # Steady state, as a running site has it: the tables analysed (autovacuum would have) and the
    # seeding's garbage out of the collector's way (a web process does not carry it).
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE experiments_joblog")
        cursor.execute("VACUUM ANALYZE experiments_jobsample")
    gc.collect()
    gc.freeze()
    page_client, api_client = Client(), Client()
    page_client.force_login(user)
    args = [study.id, trial.pk]
    figures = {  # the page and API benchmarks' own measure functions: 2 warm-ups, then 30 requests
        "trial_page": page_measure(page_client, reverse("trial_detail", args=args)),
        "logs_card": page_measure(page_client, reverse("trial_logs_live", args=args)),
        "api_logs": api_measure(api_client, reverse("api:trial-logs", args=args), token),
        "api_system_metrics": api_measure(api_client, reverse("api:trial-system-metrics", args=args), token),
    }
    result = {"log_lines": 10_000, "samples": 1_000, "requests": api_requests, "reads": figures}
    result["log_page_p95_ms"] = max(figures["trial_page"]["p95_ms"], figures["logs_card"]["p95_ms"])
    result["api_p95_ms"] = max(figures["api_logs"]["p95_ms"], figures["api_system_metrics"]["p95_ms"])
    return result


def main() -> None:
    setup_django()
    started = time.monotonic()
    result = {"host": {"cpus": os.cpu_count(), "load1_at_start": round(os.getloadavg()[0], 2)}}
    # Reading first, before this process loads TensorFlow: a web process never holds a training
    # heap, whose garbage collections would otherwise land in the requests' times.
    result.update(reading())
    result.update(tee_cost())
    result.update(training_arms())
    print(f"all arms: {time.monotonic() - started:.0f} s", file=sys.stderr)
    result["host"]["load1_at_end"] = round(os.getloadavg()[0], 2)
    result["targets"] = {"throughput_ratio_on_vs_off": ">= 0.98", "log_page_p95_ms": "<= 100", "api_p95_ms": "<= 100"}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "observability.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
