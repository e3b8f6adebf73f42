"""What a search spends: epochs to a target with and without pruning, and with Hyperband and model-based Hyperband.

    python -m benchmarks.search_cost                 # 10 seeds, two processes (about 5 to 10 minutes on 2 cores)
    python -m benchmarks.search_cost --seeds 3 --jobs 1

No database: the pruners (experiments/tuning/pruners.py, experiments/tuning/pareto_pruning.py) and the oracles
(KerasTuner's HyperbandOracle, workers/tuners/model_based_hyperband.ModelBasedHyperbandOracle) are called in this
process the way Tuneboard calls them, with parallelism 1: trials run one after another, and a trial's epoch is
compared only with the trials that had finished (completed or pruned) before it started, through their best-so-far
values at that epoch. Every epoch any trial trains counts, a pruned trial's too.

Two task families, EPOCHS (27) epochs per trial, a value to minimise per epoch, a second objective known before
training:
- real: scikit-learn's MLPClassifier trained with partial_fit, one call an epoch, on digits (1,200 training rows,
  597 validation rows, a fixed split); hyperparameters units (int, log, 4..256), learning rate (log, 1e-4..1e-1),
  alpha (log, 1e-6..1e-1), batch size (32, 64, 128, 256). Value: the validation error; second objective: the
  parameter count (75 × units + 10). A configuration's curve is trained once per process and reused.
- synthetic: curve(t) = final + (start - final) · exp(-t / tau) + noise(sd 0.003, seeded by the configuration),
  tau = 1 + 10 · speed (epochs); final rises with Branin(x1, x2) (log-scaled to 0..0.5), with (1 - size)² × 0.25
  and with 0.1 × (1 - speed): fast curves lead early and end worse, so curves cross. Second objective: size.
A trial's value at an epoch is its best so far (what the pruners and KerasTuner score); its "final" is that at epoch
27. "Best known" and "worst known" of a family: the lowest and highest final of every configuration trained to
epoch 27 anywhere in the run (all seeds, all methods).

Pruners: per seed one stream of configurations (drawn from the space with numpy); every method takes them in the
same order until it spent BUDGET epochs (28 configurations × 27 epochs, so without pruning exactly the first 28,
"the pool"; a method that prunes goes on with the stream's next configurations). Settings: the defaults a study of
each pruner gets (pruning_options.defaults_for: warmup_epochs 1, min_trials 1, min_epochs 1, reduction_factor 3;
startup_trials 5 for median, 0 for successive_halving (ASHA) and the multi-objective pareto pruner, whose points
are the best-so-far value and the second objective).

Hyperband: both oracles with max_epochs 27, factor 3, HYPERBAND_ITERATIONS (2) iterations (750 epochs, the same
schedule for both), seed workers.tuners.oracle.tuner_seed(seed), driven create_trial / update_trial / end_trial. A
trial that continues a previous round's configuration spends tuner/epochs - tuner/initial_epoch epochs (Tuneboard
warm-starts from the checkpoint) and reports the best so far at tuner/epochs.

Prints one JSON object as its last line and writes benchmarks/results/search_cost.json:
- mo_pruning_epochs_ratio: median over every (family, seed) of E(pareto) ÷ E(none), E = the epochs spent when the
  hypervolume of the completed trials' final (value, second objective) vectors first reaches 98 % of the pool's
  full-training hypervolume (the no-pruning run's at its end). Pruned trials' finals are unknown, so they add
  nothing. Reference point per (family, seed): each objective's worst over the pool plus 1 % of its range. A run
  that never reaches it counts as infinite (null per seed; the median is null if most miss).
- model_based_hyperband_vs_hyperband_epochs_ratio: median over every (family, seed) of E(model-based) ÷
  E(Hyperband), E = the epochs spent up to and including the first trial trained to 27 epochs whose value is within
  1 % of the family's known range of the best known (value ≤ best + 0.01 × (worst - best)); a run that never gets
  there counts the whole budget (750), and the misses are counted.
- targets, met: the issue's bars (≤ 0.6, ≤ 0.8) and whether each median meets them.
- by_family: both ratios as medians over one family's seeds only.
- single_objective: median over (family, seed) of E(pruner) ÷ E(none) to the first completed trial whose final is at
  least as good as the pool's best (misses infinite, counted), for median, ASHA and, for reference, pareto.
- regret_at_equal_epochs: per family and method, the median over seeds of (best final of a completed trial, or of a
  27-epoch Hyperband trial, by that many epochs spent) - best known, at 188, 375 and 750 epochs; before any such
  trial, the family's range. Pruners and Hyperband draw their configurations differently (numpy and KerasTuner).
- details: per family the medians; the known best and worst finals and Hyperband's target value; each pruner's
  epochs ratio to 98 % hypervolume (median and ASHA for reference); hv_fraction_at_equal_epochs (hypervolume of the
  completed trials ÷ the pool's full-training one, above 1 when a pruned search found configurations beyond the
  pool); pool_front_members (of the pools' full-training fronts, summed over seeds) and how many each pruner pruned,
  and in how many seeds it pruned the pool's best; model_proposals_share (of the model-based oracle's new
  configurations, the share TPE proposed, the rest random); an alternative Hyperband target (the median over seeds
  of plain Hyperband's best 27-epoch value, misses counting the whole budget) for reference; per_seed: each seed's
  figures and counts.
- seeds, settings, host, date, wall_seconds, method; code_under_test: the measured files' hashes, and whether one
  changed while the benchmark ran (the worker processes import them once each).
"""

import os

# Before numpy, scikit-learn and TensorFlow (via keras_tuner) start their thread pools: two processes share 2 cores.
os.environ.update({"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                   "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"})

import argparse
import hashlib
import json
import math
import multiprocessing
import platform
import statistics
import sys
import tempfile
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime

import numpy as np

from benchmarks.harness import RESULTS
from benchmarks.search_cost_tasks import EPOCHS, TASKS
from experiments.tuning import pareto_pruning, pruners
from experiments.tuning.pruning_options import PruningSettings

POOL = 28  # configurations the no-pruning run trains: 28 × 27 = 756 epochs, about Hyperband's 750
BUDGET = POOL * EPOCHS
HYPERBAND_ITERATIONS = 2  # 2 × 375 epochs with max_epochs 27, factor 3
HYPERBAND_BUDGET = 750
CHECKPOINTS = (188, 375, 750)  # a quarter, half and all of Hyperband's budget
HV_SHARE = 0.98
TOLERANCE = 0.01  # of the family's known range, for Hyperband's target
TARGETS = {"mo_pruning_epochs_ratio": 0.6, "model_based_hyperband_vs_hyperband_epochs_ratio": 0.8}
PRUNE_METHODS = ("none", "median", "asha", "pareto")
FAMILIES = ("real", "synthetic")




def best_so_far(values: list[float]) -> list[float]:
    out, best = [], math.inf
    for value in values:
        best = min(best, value)
        out.append(best)
    return out


# --- pruned searches -------------------------------------------------------------------------------------------


def settings_for(method: str) -> PruningSettings:
    """Each pruner with the defaults a study of it gets (pruning_options.defaults_for)."""
    pruner = {"none": "none", "median": "median", "asha": "successive_halving", "pareto": "pareto"}[method]
    return PruningSettings.for_pruner(pruner)


class Stream:
    """The seed's configurations in order, drawn on demand so that every method sees the same sequence."""

    def __init__(self, task, family: str, seed: int):
        self.task, self.configs = task, []
        self.rng = np.random.default_rng([seed, FAMILIES.index(family)])

    def __getitem__(self, index: int) -> dict:
        while len(self.configs) <= index:
            self.configs.append(self.task.draw(self.rng))
        return self.configs[index]


def should_prune(method: str, settings, epoch: int, value: float, size: float, refs: dict, completed: int) -> bool:
    if method == "none":
        return False
    last = epoch == EPOCHS
    if method == "pareto":
        others = [pareto_pruning.Point(values=point) for point in refs.get(epoch, [])]
        point = pareto_pruning.Point(values=(value, size), violation=0.0)
        return pareto_pruning.decide(settings=settings, directions=["min", "min"], execution=0, epoch=epoch,
                                     point=point, others=others, completed=completed, last=last).prune
    others = [point[0] for point in refs.get(epoch, [])]
    return pruners.decide(settings=settings, direction="min", execution=0, epoch=epoch, value=value, others=others,
                          completed=completed, last=last).prune


def pruned_search(task, stream: Stream, method: str) -> list[dict]:
    """One search over the stream until BUDGET epochs are spent. refs[epoch]: the (best so far, size) of every
    trial that finished before, at that epoch."""
    settings = settings_for(method)
    refs: dict[int, list[tuple[float, float]]] = {}
    trials, spent, completed, index = [], 0, 0, 0
    while spent < BUDGET:
        config = stream[index]
        size = task.size(config)
        values = []
        for epoch in range(1, EPOCHS + 1):
            values = best_so_far(task.curve(config, epoch))
            if should_prune(method, settings, epoch, values[-1], size, refs, completed):
                break
        done = len(values) == EPOCHS
        for epoch, value in enumerate(values, start=1):
            refs.setdefault(epoch, []).append((value, size))
        spent += len(values)
        completed += done
        trials.append({"index": index, "epochs": len(values), "completed": done,
                       "final": values[-1] if done else None, "size": size})
        index += 1
    return trials


# --- Hyperband -------------------------------------------------------------------------------------------------


def setup_django() -> None:
    """workers.tuners.oracle (tuner_seed) imports Django models: settings without a database, as search_quality."""
    import secrets

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
    import django

    django.setup()


def counting_model_based_oracle():
    """ModelBasedHyperbandOracle, unchanged but for a count of the configurations TPE proposed (the others are
    KerasTuner's random draws): a model that never proposes would make the comparison say nothing."""
    from workers.tuners.model_based_hyperband import ModelBasedHyperbandOracle

    class Counting(ModelBasedHyperbandOracle):
        model_proposals = 0

        def _proposal(self, observed, distributions):
            values = super()._proposal(observed, distributions)
            self.model_proposals += values is not None
            return values

    return Counting


def hyperband_search(task, oracle_class, seed: int, directory: str) -> dict:
    import keras_tuner as kt

    from workers.tuners.oracle import tuner_seed

    oracle = oracle_class(objective=kt.Objective("loss", "min"), hyperparameters=task.hyperparameters(),
                          max_epochs=EPOCHS, factor=3, hyperband_iterations=HYPERBAND_ITERATIONS,
                          seed=tuner_seed(seed))
    oracle.verbose = 0
    oracle._set_project_dir(directory, "p")
    trials, spent = [], 0
    while spent < HYPERBAND_BUDGET:
        trial = oracle.create_trial("tuner0")
        if trial.status != "RUNNING":
            break
        values = trial.hyperparameters.values
        config = {name: values[name] for name in task.names}
        epochs, initial = int(values["tuner/epochs"]), int(values["tuner/initial_epoch"])
        value = min(task.curve(config, epochs))
        oracle.update_trial(trial.trial_id, {"loss": value})
        trial.status = "COMPLETED"
        oracle.end_trial(trial)
        spent += epochs - initial
        trials.append({"spent": epochs - initial, "epochs": epochs, "value": value, "new": initial == 0})
    return {"trials": trials, "model_proposals": getattr(oracle, "model_proposals", 0),
            "new_configurations": sum(t["new"] for t in trials)}


def run_job(family: str, seed: int) -> dict:
    """Everything one (family, seed) trains, in one process so its curves are trained once."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # The model-based oracle builds its TPESampler (multivariate, group: "experimental") outside its own filter.
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    import keras_tuner as kt

    setup_django()

    started = time.monotonic()
    task = TASKS[family]()
    stream = Stream(task, family, seed)
    runs = {method: pruned_search(task, stream, method) for method in PRUNE_METHODS}
    pruned_seconds = time.monotonic() - started
    hyperband = {}
    with tempfile.TemporaryDirectory() as directory:
        for name, oracle_class in (("hyperband", kt.oracles.HyperbandOracle),
                                   ("model_based_hyperband", counting_model_based_oracle())):
            hyperband[name] = hyperband_search(task, oracle_class, seed, os.path.join(directory, name))
    return {"family": family, "seed": seed, "runs": runs, "hyperband": hyperband, "finals": task.finals(),
            "seconds": {"pruners": round(pruned_seconds, 1), "total": round(time.monotonic() - started, 1)}}


# --- figures ---------------------------------------------------------------------------------------------------


def dominated(a: tuple, b: tuple) -> bool:
    """b dominates a (both minimised)."""
    return b[0] <= a[0] and b[1] <= a[1] and b != a


def hypervolume(points: list[tuple], ref: tuple) -> float:
    """Exact 2-D hypervolume (both minimised): sweep by the first objective, adding a strip below the lowest second
    objective so far."""
    volume, lowest = 0.0, ref[1]
    for first, second in sorted(p for p in points if p[0] < ref[0] and p[1] < ref[1]):
        if second < lowest:
            volume += (ref[0] - first) * (lowest - second)
            lowest = second
    return volume


def epochs_to_hypervolume(trials: list[dict], ref: tuple, target: float) -> int | None:
    points, spent = [], 0
    for trial in trials:
        spent += trial["epochs"]
        if trial["completed"]:
            points.append((trial["final"], trial["size"]))
            if hypervolume(points, ref) >= target:
                return spent
    return None


def epochs_to_value(trials: list[dict], target: float) -> int | None:
    spent = 0
    for trial in trials:
        spent += trial["epochs"]
        if trial["completed"] and trial["final"] <= target:
            return spent
    return None


def best_by(entries: list[tuple[int, float]], epochs: int) -> float | None:
    """The best value among (epochs spent when known, value) up to `epochs` spent."""
    values = [value for spent, value in entries if spent <= epochs]
    return min(values) if values else None


def pruner_entries(trials: list[dict]) -> list[tuple[int, float]]:
    entries, spent = [], 0
    for trial in trials:
        spent += trial["epochs"]
        if trial["completed"]:
            entries.append((spent, trial["final"]))
    return entries


def hyperband_entries(trials: list[dict]) -> list[tuple[int, float]]:
    entries, spent = [], 0
    for trial in trials:
        spent += trial["spent"]
        if trial["epochs"] == EPOCHS:
            entries.append((spent, trial["value"]))
    return entries


def ratio(numerator: int | None, denominator: int | None) -> float | None:
    if numerator is None or denominator is None:
        return None
    return round(numerator / denominator, 4)


def median(values: list[float | None]) -> float | None:
    """Misses (None) count as infinite: the median is None when at least half of the runs missed."""
    ordered = sorted(math.inf if v is None else v for v in values)
    if not ordered:
        return None
    value = statistics.median(ordered)
    return None if math.isinf(value) or math.isnan(value) else round(value, 3)


def pool_figures(job: dict, known: dict) -> dict:
    """One (family, seed)'s pruner figures."""
    runs = job["runs"]
    pool = runs["none"][:POOL]
    points = [(t["final"], t["size"]) for t in pool]
    ref = tuple(max(p[i] for p in points) + 0.01 * (max(p[i] for p in points) - min(p[i] for p in points))
                for i in range(2))
    full = hypervolume(points, ref)
    front = {i for i, p in enumerate(points) if not any(dominated(p, q) for q in points)}
    best_index = min(range(POOL), key=lambda i: points[i][0])
    pool_best = points[best_index][0]
    out = {"hv_epochs": {}, "value_epochs": {}, "regret": {}, "hv_fraction": {}, "counts": {}}
    for method, trials in runs.items():
        out["hv_epochs"][method] = epochs_to_hypervolume(trials, ref, HV_SHARE * full)
        out["value_epochs"][method] = epochs_to_value(trials, pool_best)
        entries = pruner_entries(trials)
        out["regret"][method] = {c: regret(best_by(entries, c), known) for c in CHECKPOINTS}
        out["hv_fraction"][method] = {c: round(hv_by(trials, ref, c) / full, 4) for c in CHECKPOINTS}
        pruned = [t["index"] for t in trials if not t["completed"]]
        out["counts"][method] = {"trials": len(trials), "pruned": len(pruned),
                                 "epochs": sum(t["epochs"] for t in trials), "pool_front_members": len(front),
                                 "pool_front_members_pruned": sum(i in front for i in pruned),
                                 "pool_best_pruned": best_index in pruned}
    return out


def hv_by(trials: list[dict], ref: tuple, epochs: int) -> float:
    points, spent = [], 0
    for trial in trials:
        spent += trial["epochs"]
        if spent > epochs:
            break
        if trial["completed"]:
            points.append((trial["final"], trial["size"]))
    return hypervolume(points, ref)


def regret(value: float | None, known: dict) -> float:
    """Distance to the best known final; before any finished trial, the family's whole range."""
    return round((known["worst"] if value is None else value) - known["best"], 5)


def hyperband_figures(job: dict, known: dict, target: float) -> dict:
    out = {"epochs": {}, "missed": {}, "regret": {}, "best_value": {}}
    for name, run in job["hyperband"].items():
        entries = hyperband_entries(run["trials"])
        reached = next((spent for spent, value in entries if value <= target), None)
        out["missed"][name] = reached is None
        out["epochs"][name] = HYPERBAND_BUDGET if reached is None else reached
        out["regret"][name] = {c: regret(best_by(entries, c), known) for c in CHECKPOINTS}
        out["best_value"][name] = best_by(entries, HYPERBAND_BUDGET)
    out["ratio"] = out["epochs"]["model_based_hyperband"] / out["epochs"]["hyperband"]
    return out


def family_figures(family: str, jobs: list[dict]) -> dict:
    finals = [value for job in jobs for value in job["finals"]]
    known = {"best": min(finals), "worst": max(finals)}
    target = known["best"] + TOLERANCE * (known["worst"] - known["best"])
    pools = [pool_figures(job, known) for job in jobs]
    bands = [hyperband_figures(job, known, target) for job in jobs]
    none = [p["hv_epochs"]["none"] for p in pools]
    per_seed = {
        "seeds": [job["seed"] for job in jobs],
        "mo_pruning_epochs_ratio": [ratio(p["hv_epochs"]["pareto"], p["hv_epochs"]["none"]) for p in pools],
        "hv_epochs": {m: [p["hv_epochs"][m] for p in pools] for m in PRUNE_METHODS},
        "value_epochs": {m: [p["value_epochs"][m] for p in pools] for m in PRUNE_METHODS},
        "hyperband_epochs": {n: [b["epochs"][n] for b in bands] for n in bands[0]["epochs"]},
        "hyperband_best_value": {n: [b["best_value"][n] and round(b["best_value"][n], 5) for b in bands]
                                 for n in bands[0]["epochs"]},
        "model_based_hyperband_vs_hyperband_epochs_ratio": [round(b["ratio"], 3) for b in bands],
        "counts": {m: [p["counts"][m] for p in pools] for m in PRUNE_METHODS},
        "model_proposals": [job["hyperband"]["model_based_hyperband"]["model_proposals"] for job in jobs],
        "model_based_new_configurations": [job["hyperband"]["model_based_hyperband"]["new_configurations"]
                                           for job in jobs],
        "seconds": [job["seconds"] for job in jobs],
    }
    plain_best = statistics.median(math.inf if b["best_value"]["hyperband"] is None else b["best_value"]["hyperband"]
                                   for b in bands)
    alternative = [ratio(first_reach(job["hyperband"]["model_based_hyperband"]["trials"], plain_best),
                         first_reach(job["hyperband"]["hyperband"]["trials"], plain_best)) for job in jobs]
    value_ratios = {m: [ratio(p["value_epochs"][m], p["value_epochs"]["none"]) for p in pools]
                    for m in ("median", "asha", "pareto")}
    return {
        "known": {"best_final": round(known["best"], 5), "worst_final": round(known["worst"], 5),
                  "hyperband_target_value": round(target, 5), "configurations_trained_to_27": len(finals)},
        "mo_pruning_epochs_ratio": median(per_seed["mo_pruning_epochs_ratio"]),
        "mo_pruning_misses": sum(r is None for r in per_seed["mo_pruning_epochs_ratio"]),
        "no_pruning_hv_misses": sum(v is None for v in none),
        "hv_epochs_ratio_vs_none": {m: median([ratio(p["hv_epochs"][m], p["hv_epochs"]["none"]) for p in pools])
                                    for m in ("median", "asha", "pareto")},
        "model_based_hyperband_vs_hyperband_epochs_ratio": median([b["ratio"] for b in bands]),
        "hyperband_misses": {n: sum(b["missed"][n] for b in bands) for n in bands[0]["missed"]},
        "single_objective_epochs_ratio_vs_none": {m: median(v) for m, v in value_ratios.items()},
        "single_objective_misses": {m: sum(r is None for r in v) for m, v in value_ratios.items()},
        "regret_at_equal_epochs": regret_medians(pools, bands),
        "hv_fraction_at_equal_epochs": {m: {str(c): median([p["hv_fraction"][m][c] for p in pools])
                                            for c in CHECKPOINTS} for m in PRUNE_METHODS},
        "pool_front_members": sum(c["pool_front_members"] for c in per_seed["counts"]["none"]),
        "pool_front_members_pruned": {m: sum(c["pool_front_members_pruned"] for c in per_seed["counts"][m])
                                      for m in PRUNE_METHODS if m != "none"},
        "pool_best_pruned_seeds": {m: sum(c["pool_best_pruned"] for c in per_seed["counts"][m])
                                   for m in PRUNE_METHODS if m != "none"},
        "model_proposals_share": round(sum(per_seed["model_proposals"])
                                       / max(sum(per_seed["model_based_new_configurations"]), 1), 3),
        "alternative_hyperband_target": {
            "value": round(plain_best, 5),
            "definition": "the median over seeds of plain Hyperband's best 27-epoch value with its whole budget; "
                          "misses count the whole budget, as for the main target",
            "ratio_median": median(alternative), "per_seed": alternative},
        "per_seed": per_seed,
        "_value_ratios": value_ratios,
        "_hyperband_ratios": [b["ratio"] for b in bands],
    }


def first_reach(trials: list[dict], target: float) -> int:
    """Epochs to the first 27-epoch trial at or below target; the whole budget when none gets there."""
    return next((spent for spent, value in hyperband_entries(trials) if value <= target), HYPERBAND_BUDGET)


def regret_medians(pools: list[dict], bands: list[dict]) -> dict:
    out = {m: {str(c): median([p["regret"][m][c] for p in pools]) for c in CHECKPOINTS} for m in PRUNE_METHODS}
    for name in bands[0]["regret"]:
        out[name] = {str(c): median([b["regret"][name][c] for b in bands]) for c in CHECKPOINTS}
    return out


METHOD = (
    "Per (task family, seed): one stream of random configurations taken in the same order by no pruning, the median "
    "pruner, ASHA (successive_halving) and the multi-objective pareto pruner, each until 756 epochs are spent "
    "(parallelism 1, every trained epoch counted, pruned trials included); each epoch is judged against the trials "
    "finished before with experiments.tuning.pruners.decide / pareto_pruning.decide. MO ratio: epochs until the "
    "completed trials' (final value, second objective) hypervolume reaches 98 % of the 28-configuration pool's "
    "full-training hypervolume, pareto ÷ none; misses infinite. Hyperband: KerasTuner's HyperbandOracle and "
    "ModelBasedHyperbandOracle, 2 iterations (750 epochs each), continuations spending tuner/epochs - "
    "tuner/initial_epoch; epochs until the first 27-epoch trial within 1 % of the family's known range of the best "
    "known final, misses counted as 750. Medians over all (family, seed) runs; each family's in details."
)


def summarise(jobs: list[dict], seeds: list[int], wall: float) -> dict:
    families = {family: family_figures(family, [j for j in jobs if j["family"] == family]) for family in FAMILIES}
    every = {"mo": [r for f in families.values() for r in f["per_seed"]["mo_pruning_epochs_ratio"]],
             "hb": [r for f in families.values() for r in f.pop("_hyperband_ratios")]}
    value_ratios = [f.pop("_value_ratios") for f in families.values()]
    mo, hb = median(every["mo"]), median(every["hb"])
    result = {
        "mo_pruning_epochs_ratio": mo,
        "model_based_hyperband_vs_hyperband_epochs_ratio": hb,
        "targets": TARGETS,
        "met": {"mo_pruning_epochs_ratio": mo is not None and mo <= TARGETS["mo_pruning_epochs_ratio"],
                "model_based_hyperband_vs_hyperband_epochs_ratio":
                    hb is not None and hb <= TARGETS["model_based_hyperband_vs_hyperband_epochs_ratio"]},
        "by_family": {f: {"mo_pruning_epochs_ratio": v["mo_pruning_epochs_ratio"],
                          "model_based_hyperband_vs_hyperband_epochs_ratio":
                              v["model_based_hyperband_vs_hyperband_epochs_ratio"]} for f, v in families.items()},
        "single_objective": {
            f"{m}_epochs_ratio_vs_none": median([r for v in value_ratios for r in v[m]]) for m in ("median", "asha")},
        "regret_at_equal_epochs": {f: v["regret_at_equal_epochs"] for f, v in families.items()},
        "seeds": seeds,
        "settings": {"epochs_per_trial": EPOCHS, "pool": POOL, "pruner_budget_epochs": BUDGET,
                     "hyperband": {"max_epochs": EPOCHS, "factor": 3, "iterations": HYPERBAND_ITERATIONS,
                                   "budget_epochs": HYPERBAND_BUDGET},
                     "pruners": {m: settings_for(m).as_dict() for m in PRUNE_METHODS if m != "none"},
                     "hv_share": HV_SHARE, "hyperband_tolerance_of_range": TOLERANCE, "checkpoints": CHECKPOINTS},
        "host": {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
                 "load_average_1m_at_end": round(os.getloadavg()[0], 1)},
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "wall_seconds": round(wall, 1),
        "method": METHOD,
        "details": families,
    }
    result["single_objective"].update(
        {f"{m}_misses": sum(r is None for v in value_ratios for r in v[m]) for m in ("median", "asha")})
    result["single_objective"]["pareto_epochs_ratio_vs_none_for_reference"] = median(
        [r for v in value_ratios for r in v["pareto"]])
    return result


CODE_UNDER_TEST = ("experiments/tuning/pruners.py", "experiments/tuning/pareto_pruning.py",
                   "experiments/tuning/pruning_options.py", "workers/tuners/model_based_hyperband.py",
                   "workers/tuners/oracle.py")


def code_versions() -> dict:
    """sha256 (12 hex digits) of the files measured: the figures belong to these versions."""
    from benchmarks.harness import ROOT

    return {path: hashlib.sha256((ROOT / path).read_bytes()).hexdigest()[:12] for path in CODE_UNDER_TEST}


def main() -> None:
    parser = argparse.ArgumentParser(description="What a search spends to reach a target.")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=2, help="processes (each (family, seed) runs in one)")
    args = parser.parse_args()
    seeds = list(range(1, args.seeds + 1))
    started, code = time.monotonic(), code_versions()
    work = [(family, seed) for family in FAMILIES for seed in seeds]  # the real family first: its jobs are longest
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            jobs = list(pool.map(run_job, *zip(*work, strict=True)))
    else:
        jobs = [run_job(family, seed) for family, seed in work]
    for job in jobs:
        print(f"{job['family']} seed {job['seed']}: {job['seconds']}", file=sys.stderr)
    result = summarise(jobs, seeds, time.monotonic() - started)
    result["code_under_test"] = {"sha256": code, "changed_during_run": code != code_versions()}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "search_cost.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
