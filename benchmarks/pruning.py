"""What pruning saves, and what it costs per epoch.

    python -m benchmarks.pruning        (or `make bench`)
    python -m benchmarks.pruning --only latency    (or search: one part, merged into the JSON)

Runs against PostgreSQL and Redis like the tests, in a database of its own
(`tuneboard_bench_pruning`). Prints one JSON object as its last line and writes
benchmarks/results/pruning.json:
- search: on digits (1,797 rows), the same random search (same seed, so the same
  configurations in the same order; learning rates from 1e-5, which barely learns, to 1e-1)
  without a pruner and with the median pruner, on one real worker with parallelism 1.
  gpu_equivalent_epochs_to_reach_unpruned_best: epochs trained × devices per trial (one device
  per trial here, as a GPU trial would use) by all trials in start order up to and including the
  first that reaches the unpruned study's best score; the ratio is pruned ÷ unpruned. Also the
  epochs each whole study trained and how many trials were pruned.
- latency: the per-epoch record call (heartbeat, epoch row, and with pruning the decision) timed
  in this process with 1,000 finished trials × 20 epochs stored: p50/p95 with the median pruner
  and without a pruner, interleaved call by call; added_ms_p95 is the difference of the p95s,
  added_ms_paired_median the median of the call-by-call differences (steadier on a busy host).
  Pruning adds one query to the call (the trial's previous best and the finished trials' values at
  this epoch, read by an index-only scan); on a shared, loaded machine each round trip to
  PostgreSQL costs several milliseconds, so the figures vary from run to run.
"""

import argparse
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime

from benchmarks.harness import RESULTS, Worker, percentile, setup_django, wait_finished

DATABASE = "tuneboard_bench_pruning"
EPOCHS = 12
TRIALS = 24
SPACE = [
    {"name": "num_layers", "type": "int", "min": 1, "max": 2, "step": 1, "sampling": "linear", "parent": None,
     "parent_values": []},
    {"name": "units", "type": "int", "min": 16, "max": 128, "step": 16, "sampling": "linear", "parent": None,
     "parent_values": []},
    {"name": "optimizer", "type": "choice", "values": ["adam", "sgd"], "ordered": False, "parent": None,
     "parent_values": []},
    {"name": "learning_rate", "type": "float", "min": 1e-5, "max": 1e-1, "step": None, "sampling": "log",
     "parent": None, "parent_values": []},
]
MEDIAN = {"pruner": "median", "pruning_startup_trials": 5, "pruning_warmup_epochs": 2, "pruning_min_trials": 3}
STORED_TRIALS, STORED_EPOCHS, SAMPLES_PER_KIND = 1000, 20, 600


def _search(team, dataset, name: str, **pruning):
    from experiments.services.studies import study_create, study_start

    study = study_create(team=team, user=None, dataset=dataset, name=name, hypermodel="dense", search_space=SPACE,
                         tuner="random", objective_metric="val_loss", objective_direction="min", max_trials=TRIALS,
                         epochs=EPOCHS, patience=EPOCHS, batch_size=32, seed=5, parallelism=1, **pruning)
    study_start(study=study)
    wait_finished(study)
    assert study.status == "completed", study.message
    return study


def _trials(study) -> list[dict]:
    from experiments.models import TrialEpoch

    rows = list(study.trials.order_by("number").values("pk", "number", "status", "score", "epochs_trained"))
    for row in rows:  # epochs_trained is recorded from this release on; the rows are the ground truth
        row["epochs"] = TrialEpoch.objects.filter(trial_id=row["pk"]).count()
    return rows


def _epochs_to_reach(trials: list[dict], target: float, devices: int) -> int | None:
    spent = 0
    for trial in trials:
        spent += trial["epochs"] * devices
        if trial["status"] == "completed" and trial["score"] is not None and trial["score"] <= target:
            return spent
    return None


def measure_search(env, team, dataset) -> dict:
    worker = Worker(env, "pruning", concurrency=1)
    try:
        started = time.monotonic()
        plain = _search(team, dataset, "without pruning")
        plain_seconds = time.monotonic() - started
        started = time.monotonic()
        pruned = _search(team, dataset, "median pruning", **MEDIAN)
        pruned_seconds = time.monotonic() - started
    finally:
        worker.stop()
    full, cut = _trials(plain), _trials(pruned)
    best = min(t["score"] for t in full if t["status"] == "completed")
    pruned_best = min(t["score"] for t in cut if t["status"] == "completed")
    devices = 1  # devices per trial: the study's, as a GPU trial counts them
    unpruned_epochs = _epochs_to_reach(full, best, devices)
    pruned_epochs = _epochs_to_reach(cut, best, devices)
    result = {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "dataset": "digits", "trials": TRIALS, "epochs_per_trial": EPOCHS, "pruner": MEDIAN,
        "unpruned_best_val_loss": round(best, 5), "pruned_best_val_loss": round(pruned_best, 5),
        "gpu_equivalent_epochs_to_reach_unpruned_best": {"unpruned": unpruned_epochs, "pruned": pruned_epochs},
        "ratio_pruned_to_unpruned": None if pruned_epochs is None else round(pruned_epochs / unpruned_epochs, 3),
        "epochs_whole_study": {"unpruned": sum(t["epochs"] for t in full), "pruned": sum(t["epochs"] for t in cut)},
        "trials_pruned": sum(t["status"] == "pruned" for t in cut),
        "wall_seconds": {"unpruned": round(plain_seconds, 1), "pruned": round(pruned_seconds, 1)},
        "host_load_average_1m": round(os.getloadavg()[0], 1),
    }
    print(f"search: {result}", file=sys.stderr)
    return result


def _seed_finished_trials(team, dataset):
    """A running median-pruning study with STORED_TRIALS completed trials × STORED_EPOCHS epoch
    rows (best-so-far values as the record call writes them, and their copies as finishing
    makes them), and one running trial."""
    import random

    from django.utils import timezone

    from experiments.models import PruningReference, Trial, TrialEpoch
    from experiments.services.studies import study_create

    study = study_create(team=team, user=None, dataset=dataset, name="latency", hypermodel="dense",
                         search_space=SPACE, tuner="random", objective_metric="val_loss", objective_direction="min",
                         max_trials=STORED_TRIALS + 10, epochs=STORED_EPOCHS, patience=STORED_EPOCHS, batch_size=32,
                         pruner="median", pruning_startup_trials=5, pruning_warmup_epochs=1, pruning_min_trials=1)
    study.status = "running"
    study.save(update_fields=["status"])
    rng = random.Random(0)
    now = timezone.now()
    trials = Trial.objects.bulk_create([
        Trial(study=study, trial_id=str(n), number=n + 1, status="completed", score=rng.random(), started=now,
              finished=now, epochs_trained=STORED_EPOCHS) for n in range(STORED_TRIALS)])
    rows = []
    for trial in trials:
        best, start = None, rng.uniform(1.0, 3.0)
        for epoch in range(STORED_EPOCHS):
            loss = start / (epoch + 1) + rng.uniform(0, 0.2)
            best = loss if best is None else min(best, loss)
            rows.append(TrialEpoch(trial=trial, epoch=epoch, metrics={"val_loss": loss, "loss": loss},
                                   best_objective=best))
    TrialEpoch.objects.bulk_create(rows, batch_size=5000)
    PruningReference.objects.bulk_create(
        [PruningReference(study=study, trial=row.trial, execution=0, epoch=row.epoch,
                          best_objective=row.best_objective, completed=True) for row in rows], batch_size=5000)
    running = Trial.objects.create(study=study, trial_id="running", number=STORED_TRIALS + 1, status="running",
                                   started=now, heartbeat=now)
    return study, running


def measure_latency(team, dataset) -> dict:
    from django.db import connection

    from experiments.services.trial_epochs import StudyPruning, trial_record_epoch

    study, running = _seed_finished_trials(team, dataset)
    with connection.cursor() as cursor:  # as autovacuum leaves them: statistics and visibility maps
        cursor.execute("VACUUM ANALYZE experiments_pruningreference")
        cursor.execute("VACUUM ANALYZE experiments_trialepoch")
    pruning = StudyPruning.for_study(study)
    samples = {"with_pruning": [], "without_pruning": []}
    differences = []
    kept = pruned = 0
    calls = 0
    while len(samples["with_pruning"]) < SAMPLES_PER_KIND:
        for epoch in range(STORED_EPOCHS):
            loss = 1.5 / (epoch + 1) + (calls % 7) / 10  # some epochs judged behind the median, some not
            calls += 1
            pair = []
            for kind, context in (("with_pruning", pruning), ("without_pruning", None)):
                started = time.perf_counter()
                verdict = trial_record_epoch(trial_pk=running.pk, execution=0, epoch=epoch,
                                             metrics={"val_loss": loss, "loss": loss}, pruning=context)
                pair.append((time.perf_counter() - started) * 1000)
                samples[kind].append(pair[-1])
                if context is not None:
                    kept, pruned = kept + bool(verdict), pruned + (not verdict)
            differences.append(pair[0] - pair[1])
    result = {"stored_trials": STORED_TRIALS, "epochs_per_trial": STORED_EPOCHS, "samples": SAMPLES_PER_KIND,
              "decisions": {"kept": kept, "pruned": pruned}}
    for kind, values in samples.items():
        values = values[:SAMPLES_PER_KIND]
        result[kind] = {"p50_ms": round(percentile(values, 50), 2), "p95_ms": round(percentile(values, 95), 2)}
    result["added_ms_p95"] = round(result["with_pruning"]["p95_ms"] - result["without_pruning"]["p95_ms"], 2)
    result["added_ms_p50"] = round(result["with_pruning"]["p50_ms"] - result["without_pruning"]["p50_ms"], 2)
    result["added_ms_paired_median"] = round(statistics.median(differences[:SAMPLES_PER_KIND]), 2)
    result["measured_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    result["host_load_average_1m"] = round(os.getloadavg()[0], 1)  # on 2 cores: above 2, calls queue for CPU
    print(f"latency: {result}", file=sys.stderr)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description="What pruning saves, and what it costs per epoch.")
    parser.add_argument("--only", choices=["latency", "search"], help="run one part; the other is kept from the "
                        "last results file")
    only = parser.parse_args().only
    env = setup_django(DATABASE)
    from experiments.services.datasets import dataset_create_bundled
    from experiments.services.teams import team_create

    team = team_create(name="bench")
    dataset = dataset_create_bundled(team=team, user=None, bundled_name="digits")
    path = RESULTS / "pruning.json"
    result = json.loads(path.read_text()) if only and path.exists() else {}
    if only in (None, "latency"):
        result["latency"] = measure_latency(team, dataset)
    if only in (None, "search"):
        result["search"] = measure_search(env, team, dataset)
    result["targets"] = {"latency.added_ms_p95": 5, "search.ratio_pruned_to_unpruned": "< 1"}
    RESULTS.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
