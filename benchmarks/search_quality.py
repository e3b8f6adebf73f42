"""How good are the tuners' searches, and what does a Bayesian claim cost on a busy host?

    python -m benchmarks.search_quality            # everything (PostgreSQL for the claim part)
    python -m benchmarks.search_quality quality    # only the search quality (no database)
    python -m benchmarks.search_quality quality --jobs 2 --functions branin,mixed --tuners random,optuna_tpe

Search quality: each tuner minimises standard test functions, driven exactly as the claim path
drives it (workers/tuners/oracle.py): before every proposal a fresh oracle of the tuner's class is
rebuilt from the stored trial rows and oracle state, proposes one trial, is told its result, and
its state is stored again. Every tuner gets the same seeds. Reported: median and mean best
(and regret, best minus the known optimum) after 10, 20 and 40 trials over SEEDS seeds.

- branin: 2 floats, optimum 0.397887
- hartmann6: 6 floats on [0, 1], optimum -3.32237
- mixed: an Int with a step, a log-scaled Float, a Float and a 4-way Choice, optimum 0
- svc_digits: a real, cheap objective: the validation error of an RBF SVC on scikit-learn's
  digits (C and gamma on log scales, 300 training rows, 900 validation rows: with more training
  rows every tuner found 0 errors on the validation split and the function told them apart no more); no known
  optimum, so its "regret" is the best validation error itself

Tuners: Tuneboard's Bayesian (tuner "bayesian"), KerasTuner 1.4.8's own BayesianOptimizationOracle
for reference, random search, and Optuna's TPE and Gaussian-process samplers as Tuneboard tuners
("optuna_tpe", "optuna_gp"); every model-based tuner starts with the same INITIAL random trials
(the study's initial_random_trials). `--jobs N` spreads the (function, tuner) runs over N
processes: the proposals are seeded, so only the seconds depend on it (and on the host's load).

Claim cost: p95 of a Bayesian claim (through trial_claims.claim_trial on PostgreSQL) with 1,000
trials stored, on a quiet host and with two processes training Keras models beside it.

The JSON goes to benchmarks/results/search_quality.json; its last line is printed."""

import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

from benchmarks.harness import RESULTS, ROOT

SEEDS = int(os.environ.get("SEARCH_QUALITY_SEEDS", "15"))
TRIALS = 40
CHECKPOINTS = (10, 20, 40)
INITIAL = 10  # initial random trials for both Bayesian oracles, as in the comparison
# KerasTuner draws each random value with the seed `study seed + values drawn so far`: studies
# seeded 1, 2, 3, ... draw the same values shifted by a few places (with two hyperparameters,
# seed 3's trials are seed 1's from its second on), so 15 consecutive seeds are 2 to 6 searches.
# Seeds SEED_STRIDE apart never share a draw within a benchmark's trials.
SEED_STRIDE = 1000


def study_seeds() -> list[int]:
    return [SEED_STRIDE * n for n in range(1, SEEDS + 1)]


def _float(name, low, high, **extra):
    return {"name": name, "type": "float", "min": low, "max": high, "step": None, "sampling": "linear",
            "parent": None, "parent_values": [], **extra}


def branin(v):
    x1, x2 = v["x1"], v["x2"]
    b, c, r, s, t = 5.1 / (4 * np.pi**2), 5 / np.pi, 6, 10, 1 / (8 * np.pi)
    return float((x2 - b * x1**2 + c * x1 - r) ** 2 + s * (1 - t) * np.cos(x1) + s)


HARTMANN_A = np.array([[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14],
                       [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]])
HARTMANN_P = 1e-4 * np.array([[1312, 1696, 5569, 124, 8283, 5886], [2329, 4135, 8307, 3736, 1004, 9991],
                              [2348, 1451, 3522, 2883, 3047, 6650], [4047, 8828, 8732, 5743, 1091, 381]])
HARTMANN_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])


def hartmann6(v):
    x = np.array([v[f"x{i}"] for i in range(1, 7)])
    return float(-np.sum(HARTMANN_ALPHA * np.exp(-np.sum(HARTMANN_A * (x - HARTMANN_P) ** 2, axis=1))))


ACTIVATION_PENALTY = {"relu": 0.0, "elu": 0.05, "tanh": 0.15, "selu": 0.3}


def mixed(v):
    return float((np.log10(v["learning_rate"]) - np.log10(3e-3)) ** 2 / 4 + 4 * ((v["units"] - 96) / 248) ** 2
                 + 4 * (v["dropout"] - 0.2) ** 2 + ACTIVATION_PENALTY[v["activation"]])


class SvcDigits:
    def __init__(self):
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split

        x, y = load_digits(return_X_y=True)
        self.x_train, self.x_val, self.y_train, self.y_val = train_test_split(
            x / 16.0, y, train_size=300, test_size=900, random_state=0, stratify=y)
        self.cache = {}

    def __call__(self, v):
        from sklearn.svm import SVC

        key = (v["C"], v["gamma"])
        if key not in self.cache:
            model = SVC(C=v["C"], gamma=v["gamma"]).fit(self.x_train, self.y_train)
            self.cache[key] = float(1.0 - model.score(self.x_val, self.y_val))
        return self.cache[key]


FUNCTIONS = {
    "branin": {"space": [_float("x1", -5.0, 10.0), _float("x2", 0.0, 15.0)], "f": branin, "optimum": 0.397887},
    "hartmann6": {"space": [_float(f"x{i}", 0.0, 1.0) for i in range(1, 7)], "f": hartmann6, "optimum": -3.32237},
    "mixed": {"space": [
        {"name": "units", "type": "int", "min": 8, "max": 256, "step": 8, "sampling": "linear", "parent": None,
         "parent_values": []},
        _float("learning_rate", 1e-5, 1e-1, sampling="log"),
        _float("dropout", 0.0, 0.5),
        {"name": "activation", "type": "choice", "values": list(ACTIVATION_PENALTY), "ordered": False,
         "parent": None, "parent_values": []},
    ], "f": mixed, "optimum": 0.0},
    "svc_digits": {"space": [_float("C", 1e-2, 1e3, sampling="log"), _float("gamma", 1e-5, 1e0, sampling="log")],
                   "f": None, "optimum": None},
}


def _study(space: list[dict], tuner: str, seed: int):
    """What the oracle adapter reads of a Study row, without the database."""
    from experiments.models import Study

    return Study(id=seed, tuner=tuner, search_space=space, seed=seed, objective_metric="score",
                 objective_direction="min", max_trials=TRIALS, initial_random_trials=INITIAL,
                 max_retries_per_trial=0, max_consecutive_failed_trials=3, epochs=1, oracle_state={},
                 oracle_version=0, failures_counted_from=0)


def _keras_tuner_bayesian(study):
    """KerasTuner's own oracle, for reference, with our state-in-PostgreSQL shim only."""
    import keras_tuner as kt

    from workers.tuners import oracle as adapter
    from workers.tuners.hyperparameters import to_hyperparameters

    class KerasTunerBayesian(adapter._StateInPostgres, kt.oracles.BayesianOptimizationOracle):
        pass

    built = KerasTunerBayesian(objective=kt.Objective("score", "min"), max_trials=study.max_trials,
                               num_initial_points=study.initial_random_trials,
                               hyperparameters=to_hyperparameters(study.search_space), tune_new_entries=False,
                               allow_new_entries=True, seed=study.seed, max_retries_per_trial=0,
                               max_consecutive_failed_trials=3)
    built.verbose = 0
    return built


TUNERS = {
    "tuneboard_bayesian": ("bayesian", None),
    "keras_tuner_bayesian": ("bayesian", _keras_tuner_bayesian),
    "random": ("random", None),
    "optuna_tpe": ("optuna_tpe", None),
    "optuna_gp": ("optuna_gp", None),
}


def run_search(name: str, function: str, seed: int, objective) -> list[float]:
    """The objective of each trial in order, every proposal from an oracle rebuilt from the
    stored rows and state (workers/tuners/oracle.py's load_oracle, the cache emptied: another worker
    always claimed last)."""
    from workers.tuners import oracle as adapter

    tuner, factory = TUNERS[name]
    study = _study(FUNCTIONS[function]["space"], tuner, seed)
    rows: dict[str, tuple[dict, dict]] = {}
    tuners = adapter.KerasTunerOracles()
    values = []
    for _ in range(TRIALS):
        adapter._cache.clear()
        if factory is None:
            oracle = tuners.load(study, lambda since: list(rows.values()))
        else:
            oracle = factory(study)
            space = oracle.hyperparameters
            oracle.trials = {s["trial_id"]: adapter._trial_from_row(space, v, s) for v, s in rows.values()}
            if study.oracle_state:
                oracle.set_state(study.oracle_state)
            oracle.failures_counted_from, oracle.failure_limit_reached = 0, False
        proposal = tuners.propose(study, oracle, "bench")
        assert proposal.status == "running", proposal.status
        score = objective(proposal.values)
        ended = tuners.complete(oracle, proposal.trial_id, objective="score", score=score, best_step=0)
        rows[proposal.trial_id] = (proposal.values, ended.state)
        study.oracle_state, study.oracle_version = tuners.state(oracle), study.oracle_version + 1
        values.append(score)
    return values


def _summary(runs: list[list[float]], optimum: float | None) -> dict:
    found = {}
    for n in CHECKPOINTS:
        best = [min(run[:n]) for run in runs]
        regret = [b - (optimum or 0.0) for b in best]
        found[str(n)] = {"median_best": round(statistics.median(best), 5), "mean_best": round(statistics.mean(best), 5),
                         "median_regret": round(statistics.median(regret), 5),
                         "mean_regret": round(statistics.mean(regret), 5)}
    return found


def _objective(function: str):
    return FUNCTIONS[function]["f"] or SvcDigits()


def _run_tuner(function: str, name: str, objective=None) -> dict:
    """Every seed of one tuner on one function: the objective of each trial, and the seconds."""
    objective = objective or _objective(function)
    started = time.monotonic()
    runs = [run_search(name, function, seed, objective) for seed in study_seeds()]
    seconds = round(time.monotonic() - started, 1)
    print(f"{function} {name}: {_summary(runs, FUNCTIONS[function]['optimum'])['40']} ({seconds} s)",
          file=sys.stderr, flush=True)
    return {"runs": runs, "seconds": seconds}


def _run_tuner_in_child(function: str, name: str) -> dict:
    _setup_quality_only()
    return _run_tuner(function, name)


def _vs(ours: list[float], theirs: list[float]) -> list[int]:
    pairs = list(zip(ours, theirs, strict=True))
    return [sum(a < b for a, b in pairs), sum(a == b for a, b in pairs), sum(a > b for a, b in pairs)]


RUNS = ROOT / "var" / "bench" / "search_quality-runs.json"  # every trial's objective, for --reuse (not kept in git)


def _reusable() -> dict:
    """(function, tuner) -> runs of the last quality run, when it had as many seeds and trials."""
    if not RUNS.exists():
        return {}
    stored = json.loads(RUNS.read_text())
    if (stored.get("study_seeds"), stored.get("trials")) != (study_seeds(), TRIALS):
        return {}
    return {(function, name): found
            for function, by_tuner in stored["runs"].items() for name, found in by_tuner.items()}


def measure_quality(tuners=tuple(TUNERS), functions=tuple(FUNCTIONS), jobs: int = 1, reuse=()) -> dict:
    """`reuse`: tuners whose runs are taken from the last quality run's RUNS file (their code
    unchanged since: the proposals are seeded, so rerunning them gives the same figures)."""
    stored = _reusable() if reuse else {}
    reused = {pair: stored[pair] for pair in stored if pair[1] in reuse and pair[0] in functions and pair[1] in tuners}
    work = [(function, name) for function in functions for name in tuners if (function, name) not in reused]
    if jobs > 1:
        import concurrent.futures
        import multiprocessing

        # Fresh interpreters (spawn): forking a process that loaded TensorFlow is not safe. The
        # slowest tuner (KerasTuner's own) first, so the processes end about together.
        order = sorted(work, key=lambda pair: pair[1] != "keras_tuner_bayesian")
        with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = {pair: pool.submit(_run_tuner_in_child, *pair) for pair in order}
            done = {pair: future.result() for pair, future in futures.items()}
    else:
        objectives = {function: _objective(function) for function in functions}
        done = {(function, name): _run_tuner(function, name, objectives[function]) for function, name in work}
    done.update(reused)
    previous = json.loads(RUNS.read_text())["runs"] if stored else {}
    runs_by_function = {function: {**previous.get(function, {}),
                                   **{name: done[function, name] for name in tuners}} for function in functions}
    RUNS.parent.mkdir(parents=True, exist_ok=True)
    kept = {"study_seeds": study_seeds(), "trials": TRIALS, "runs": {**previous, **runs_by_function}}
    RUNS.write_text(json.dumps(kept) + "\n")
    results = {}
    for function in functions:
        spec = FUNCTIONS[function]
        per_tuner, best_at_40, seconds = {}, {}, {}
        for name in tuners:
            runs = done[function, name]["runs"]
            seconds[name] = done[function, name]["seconds"]
            per_tuner[name] = _summary(runs, spec["optimum"])
            best_at_40[name] = [round(min(run), 5) for run in runs]
        entry = {"optimum": spec["optimum"], "tuners": per_tuner, "best_at_40_by_seed": best_at_40,
                 "seconds": seconds}
        if any((function, name) in reused for name in tuners):
            entry["reused_from_last_run"] = sorted(name for name in tuners if (function, name) in reused)
        if spec["optimum"] is None:
            entry["regret_is"] = "the best value itself (the validation error): no known optimum"
        if "keras_tuner_bayesian" in per_tuner:
            theirs = per_tuner["keras_tuner_bayesian"]["40"]["median_regret"]
            for name in (t for t in tuners if t != "keras_tuner_bayesian"):
                ours = per_tuner[name]["40"]["median_regret"]
                ratio = round(ours / theirs, 3) if theirs else None
                if name == "tuneboard_bayesian":
                    entry["tuneboard_bayesian_vs_keras_tuner_median_at_40"] = ratio
                    entry["tuneboard_bayesian_wins_ties_losses_vs_keras_tuner"] = _vs(
                        best_at_40[name], best_at_40["keras_tuner_bayesian"])
                entry.setdefault("vs_keras_tuner_median_regret_ratio_at_40", {})[name] = ratio
                entry.setdefault("wins_ties_losses_vs_keras_tuner_at_40", {})[name] = _vs(
                    best_at_40[name], best_at_40["keras_tuner_bayesian"])
        results[function] = entry
    return results


TRAINER = """
import os, time
import numpy as np
import keras
x = np.random.default_rng(0).normal(size=(4096, 64)).astype("float32")
y = (x[:, :8].sum(axis=1) > 0).astype("float32")
model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(256, activation="relu"),
                          keras.layers.Dense(256, activation="relu"), keras.layers.Dense(1, activation="sigmoid")])
model.compile("adam", "binary_crossentropy")
end = time.monotonic() + float(os.environ["TRAIN_SECONDS"])
while time.monotonic() < end:
    model.fit(x, y, epochs=1, batch_size=64, verbose=0)
"""


def measure_claims(busy: bool, stored: int = 1000) -> dict:
    """Interleaved Bayesian claim p95 with `stored` trials (benchmarks.orchestration's method),
    optionally with two processes training Keras models beside it, as two busy workers would."""
    from benchmarks.orchestration import _fill_and_time, _study
    from experiments.models import Dataset, Team

    team, dataset = Team.objects.get(name="bench"), Dataset.objects.get(team__name="bench")
    study = _study(team, dataset, trials=stored + 200, sleep=0.0, start=False, tuner="bayesian")
    trainers = []
    if busy:
        env = {**os.environ, "TRAIN_SECONDS": "900", "TF_CPP_MIN_LOG_LEVEL": "3"}
        trainers = [subprocess.Popen([sys.executable, "-c", TRAINER], cwd=ROOT, env=env) for _ in range(2)]
        time.sleep(15)  # both training
    try:
        started = time.monotonic()
        samples = _fill_and_time(study, stored, cold=False)["interleaved"]
    finally:
        for trainer in trainers:
            trainer.kill()
            trainer.wait()
    found = {"p95_ms": round(float(np.percentile(samples, 95)), 1), "median_ms": round(statistics.median(samples), 1),
             "samples": len(samples), "seconds": round(time.monotonic() - started, 1)}
    print(f"bayesian claims at {stored} ({'busy' if busy else 'quiet'}): {found}", file=sys.stderr)
    return found


def _setup_quality_only() -> None:
    import secrets
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    warnings.filterwarnings("ignore", category=ConvergenceWarning)  # KerasTuner's own fits, by the thousand

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
    import django

    django.setup()


def _arguments():
    import argparse

    parser = argparse.ArgumentParser(prog="python -m benchmarks.search_quality")
    parser.add_argument("parts", nargs="*", choices=["quality", "claims"], default=["quality", "claims"])
    parser.add_argument("--functions", default=",".join(FUNCTIONS), help="comma-separated, of: " + ", ".join(FUNCTIONS))
    parser.add_argument("--tuners", default=",".join(TUNERS), help="comma-separated, of: " + ", ".join(TUNERS))
    parser.add_argument("--reuse", default="", help="comma-separated tuners whose runs (every seed, every trial) "
                        "are taken from the last quality run's " + RUNS.name + " instead of run again")
    parser.add_argument("--jobs", type=int, default=1, help="processes for the quality part (its seconds then "
                        "include the other processes' load)")
    arguments = parser.parse_args()
    for given, known in ((arguments.functions, FUNCTIONS), (arguments.tuners, TUNERS), (arguments.reuse, TUNERS)):
        unknown = set(filter(None, given.split(","))) - set(known)
        if unknown:
            parser.error(f"unknown: {', '.join(sorted(unknown))}")
    return arguments


def main() -> None:
    arguments = _arguments()
    parts = arguments.parts or ["quality", "claims"]
    if "claims" in parts:
        from benchmarks.harness import setup_django

        setup_django()
        from experiments.services.datasets import dataset_create_bundled
        from experiments.services.teams import team_create

        dataset_create_bundled(team=team_create(name="bench"), user=None, bundled_name="iris")
    else:
        _setup_quality_only()
    started = time.monotonic()
    result: dict = {"seeds": SEEDS, "study_seeds": study_seeds(), "trials": TRIALS, "initial_random_trials": INITIAL,
                    "driven_as": "an oracle rebuilt from stored rows and state before every proposal"}
    if "quality" in parts:
        result["jobs"] = arguments.jobs
        result["functions"] = measure_quality(
            tuple(arguments.tuners.split(",")), tuple(arguments.functions.split(",")), jobs=arguments.jobs,
            reuse=tuple(filter(None, arguments.reuse.split(","))))
    if "claims" in parts:
        quiet, busy = measure_claims(busy=False), measure_claims(busy=True)
        result.update({"bayesian_claim_ms_p95_at_1000_quiet": quiet["p95_ms"],
                       "bayesian_claim_ms_p95_at_1000_busy": busy["p95_ms"],
                       "bayesian_claims_at_1000": {"quiet": quiet, "busy": busy}})
    result["targets"] = {"tuneboard_bayesian_vs_keras_tuner_median_at_40": "<= 1",
                         "bayesian_claim_ms_p95_at_1000_busy": 250}
    result["cores"] = os.cpu_count()
    result["elapsed_seconds"] = round(time.monotonic() - started, 1)
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = "search_quality.json" if set(parts) == {"quality", "claims"} else f"search_quality-{'-'.join(parts)}.json"
    (RESULTS / name).write_text(json.dumps(result, indent=2) + "\n")
    combined = _combined()
    if combined and name != "search_quality.json":
        (RESULTS / "search_quality.json").write_text(json.dumps(combined, indent=2) + "\n")
    print(json.dumps(combined or result))


def _combined() -> dict | None:
    """The quality and claims parts, run separately (quality takes tens of minutes, claims want a
    quiet host), as one result: search_quality.json, each part's own timing kept."""
    quality, claims = RESULTS / "search_quality-quality.json", RESULTS / "search_quality-claims.json"
    if not (quality.exists() and claims.exists()):
        return None
    found, timing = json.loads(quality.read_text()), json.loads(claims.read_text())
    return {**found, **{k: v for k, v in timing.items() if k.startswith("bayesian_claim")},
            "elapsed_seconds": {"quality": found["elapsed_seconds"], "claims": timing["elapsed_seconds"]},
            "parts": "quality and claims measured in separate runs of the same code"}


if __name__ == "__main__":
    main()
