"""The `recipes` part of benchmarks.ensembles: what an ensemble recipe buys over its best member.

For each of three datasets (digits_images and breast_cancer, bundled; a generated harder tabular
set), split as Tuneboard splits a dataset (15 % validation, 15 % test, split seed 0):
- two random-search studies, one per model family, TRIALS trials each of at most EPOCHS epochs
  (early stopping, patience PATIENCE), trained through workers.training.fitting.run_trial as a worker
  trains a trial; a trial's member is its search checkpoint (the best epoch, trained on the
  training split only). Images: the built-in `dense` and `cnn`. Tabular data has only `dense`
  built in, so the second family is a team's: benchmarks/team_hypermodels.build_logistic;
- the recipe rule as experiments/selectors/recipes.py applies it: each study's top K by
  validation loss, then best first at most M per hypermodel, then (optionally) the correlation
  cap of experiments/ensembling/diversity.correlation_pick on the validation predictions;
- weights fitted on the validation predictions only: mean, Nelder–Mead and greedy
  (workers/ensembles/blending.py, negligible weights dropped as build_ensemble drops them) and stacking
  (workers/ensembles/stacking.py); every figure is then measured on validation and test.
The recipe's method is chosen on validation (the lowest validation loss of Nelder–Mead, greedy
and stacking; stacking's is its cross-validated loss, since its in-sample loss flatters it) and
`beats_best_member_on_test` says whether that method's test log loss is below the test log loss
of the member that was best on validation. For contrast, `collapse` ensembles the top 3 of ONE
study of one family. Seeds: ENSEMBLE_RECIPES_SEEDS (default "1"), each a fresh set of searches.
"""

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

K, M = 3, 2  # top K per study, at most M per hypermodel
CORRELATION_CAP = None  # the recipe's default: off (a variant with CAP_VARIANT is reported too)
CAP_VARIANT = 0.95
TRIALS = int(os.environ.get("ENSEMBLE_RECIPES_TRIALS", "6"))
EPOCHS, PATIENCE, BATCH = int(os.environ.get("ENSEMBLE_RECIPES_EPOCHS", "15")), 4, 32
TARGET = ("never worse than its best member on validation; beats it on test on at least two of three "
          "datasets")
CHOOSABLE = ("nelder_mead", "greedy", "stacking")


def _generated():
    """Harder than the bundled sets: 3 overlapping classes, 2 clusters each, redundant and
    useless features, 8 % of labels replaced at random."""
    from sklearn.datasets import make_classification

    from experiments.datasets.core import ParsedDataset

    x, y = make_classification(n_samples=3000, n_features=20, n_informative=6, n_redundant=4, n_repeated=0,
                               n_classes=3, n_clusters_per_class=2, class_sep=0.8, flip_y=0.08, random_state=0)
    return ParsedDataset(x=x.astype(np.float32), y=y.astype(np.int64), feature_names=[f"f{i}" for i in range(20)],
                         task="classification", classes=["0", "1", "2"])


GENERATED = ("make_classification(n_samples=3000, n_features=20, n_informative=6, n_redundant=4, n_classes=3, "
             "n_clusters_per_class=2, class_sep=0.8, flip_y=0.08, random_state=0)")


def _dataset(name: str):
    from experiments.datasets.bundled import load_bundled
    from experiments.datasets.splits import split_indices
    from workers.hypermodels.base import DataInfo
    from workers.training.fitting import DatasetArrays

    parsed = _generated() if name == "generated" else load_bundled(name)
    # experiments/services/datasets.py's defaults for a bundled dataset or an upload.
    train, val, test = split_indices(parsed, val_fraction=0.15, test_fraction=0.15, seed=0)
    arrays = DatasetArrays(parsed.x[train], parsed.y[train], parsed.x[val], parsed.y[val], parsed.x[test],
                           parsed.y[test])
    info = DataInfo.from_training_split(arrays.x_train, "classification", len(parsed.classes), kind=parsed.kind)
    return arrays, info


def _families(kind: str) -> list[tuple[str, list, object]]:
    from benchmarks.team_hypermodels import LOGISTIC_SPACE, build_logistic
    from experiments.tuning.hypermodel_catalog import CNN_DEFAULT_SPACE, DENSE_DEFAULT_SPACE
    from workers.hypermodels import resolve

    dense = ("dense", DENSE_DEFAULT_SPACE, resolve("dense"))
    if kind == "image":
        return [dense, ("cnn", CNN_DEFAULT_SPACE, resolve("cnn"))]
    return [dense, ("logistic", LOGISTIC_SPACE, build_logistic)]


def _random_hp(space: list, seed: int):
    """One random-search proposal: every hyperparameter drawn uniformly (in its sampling's scale)."""
    from workers.tuners.hyperparameters import to_hyperparameters

    hp = to_hyperparameters(space)
    for i, param in enumerate(hp.space):
        hp.values[param.name] = param.random_sample(seed * 1009 + i)
    return hp


class _Quiet:
    def epoch_end(self, execution, epoch, logs):
        return True


def _study(hypermodel: str, space: list, build, arrays, info, seed: int, workdir: Path) -> list[dict]:
    """A random search of TRIALS trials; each trial's validation and test predictions from its checkpoint."""
    import keras

    from workers.training import checkpoints
    from workers.training.fitting import TrialSpec, run_trial
    from workers.training.inference import predict
    from workers.tuners.hyperparameters import active_values

    trials = []
    for number in range(TRIALS):
        hp = _random_hp(space, seed * 100 + number)
        spec = TrialSpec(objective="val_loss", direction="min", epochs=EPOCHS, batch_size=BATCH, patience=PATIENCE,
                         executions=1, seed=seed * 100 + number)
        trial_dir = workdir / f"{hypermodel}-{seed}-{number}"
        trial_dir.mkdir(parents=True)
        result = run_trial(build=lambda hp=hp: build(hp, info), spec=spec, data=arrays, reporter=_Quiet(),
                           workdir=trial_dir)
        model = build(hp, info)
        checkpoints.restore(model, result.checkpoint_path)
        val_p, test_p = (predict(model, x, 256).astype("float64") for x in (arrays.x_val, arrays.x_test))
        trials.append({"hypermodel": hypermodel, "number": number, "val_loss": float(result.score),
                       "epochs": result.epochs_trained, "values": active_values(hp), "val": val_p, "test": test_p})
        keras.backend.clear_session()
    return trials


def _pick(studies: list[list[dict]], cap: float | None, per_group_max: int = M) -> list[dict]:
    """experiments/selectors/recipes.recipe_candidates's rule, then the correlation cap."""
    from experiments.ensembling.diversity import correlation_pick

    ranked = []
    for trials in studies:
        ranked += sorted(trials, key=lambda t: (t["val_loss"], t["number"]))[:K]
    ranked.sort(key=lambda t: t["val_loss"])
    picked, per_group = [], {}
    for trial in ranked:
        if per_group.get(trial["hypermodel"], 0) < per_group_max:
            picked.append(trial)
            per_group[trial["hypermodel"]] = per_group.get(trial["hypermodel"], 0) + 1
    keys = [f"{t['hypermodel']}:{t['number']}" for t in picked]
    kept, _ = correlation_pick(keys, {k: t["val"] for k, t in zip(keys, picked, strict=True)}, cap)
    return [t for k, t in zip(keys, picked, strict=True) if k in kept]


def _metrics(predicted: np.ndarray, y: np.ndarray) -> dict:
    from workers.ensembles import blending

    found = blending.metrics(predicted, y, "classification")
    return {"log_loss": round(found["log_loss"], 4), "accuracy": round(found["accuracy"], 4)}


def _stacking(val: np.ndarray, y_val: np.ndarray, seed: int):
    try:
        from workers.ensembles.stacking import fit_stacking
    except ImportError:
        return None
    return fit_stacking(val, y_val, "classification", folds=5, seed=seed)


def _methods(members: list[dict], arrays, seed: int) -> dict:
    from workers.ensembles import blending

    val = np.stack([m["val"] for m in members])
    test = np.stack([m["test"] for m in members])
    y_val, y_test = arrays.y_val, arrays.y_test
    best = min(range(len(members)), key=lambda i: members[i]["val_loss"])
    out = {"best_member": {"hypermodel": members[best]["hypermodel"], "val": _metrics(val[best], y_val),
                           "test": _metrics(test[best], y_test)}}
    for method in ("mean", "nelder_mead", "greedy"):
        weights = blending.fit(method, val, y_val, "classification", rounds=50, seed=seed).weights
        weights = blending.without_negligible(weights)
        out[method] = {"weights": [round(float(w), 4) for w in weights],
                       "val": _metrics(blending.blend(val, weights), y_val),
                       "test": _metrics(blending.blend(test, weights), y_test)}
    stacker = _stacking(val, y_val, seed)
    if stacker is None:
        out["stacking"] = {"available": False}
    else:
        out["stacking"] = {"val": _metrics(stacker.predict(val), y_val),
                           "val_cross_validated_log_loss": round(stacker.cv_loss, 4),
                           "val_cross_validated_best_member_log_loss": round(stacker.cv_best_member_loss, 4),
                           "test": _metrics(stacker.predict(test), y_test), "strength": stacker.strength}
    member_val = out["best_member"]["val"]["log_loss"]
    choice_loss = {}
    for method in ("mean", *CHOOSABLE):
        entry = out[method]
        if "val" not in entry:
            continue
        # Stacking is judged by its cross-validated loss where it reports one: its in-sample
        # validation loss comes from the rows it was fitted on.
        loss = entry.get("val_cross_validated_log_loss") or entry["val"]["log_loss"]
        # ... and against the best member's loss over the same folds.
        reference = entry.get("val_cross_validated_best_member_log_loss") or member_val
        entry["never_worse_than_best_member_on_validation"] = bool(loss <= reference + 1e-6)
        if method in CHOOSABLE:
            choice_loss[method] = loss
    chosen = min(choice_loss, key=choice_loss.get)
    out["chosen_method"] = chosen
    out["chosen_test"] = out[chosen]["test"]
    out["beats_best_member_on_test"] = bool(out[chosen]["test"]["log_loss"] < out["best_member"]["test"]["log_loss"])
    return out


def _one_seed(name: str, arrays, info, seed: int, workdir: Path) -> dict:
    started = time.perf_counter()
    studies = [_study(hm, space, build, arrays, info, seed, workdir) for hm, space, build in _families(info.kind)]
    members = _pick(studies, CORRELATION_CAP)
    result = {"seed": seed,
              "studies": {s[0]["hypermodel"]: sorted(round(t["val_loss"], 4) for t in s) for s in studies},
              "members": [{"hypermodel": m["hypermodel"], "trial": m["number"], "val_loss": round(m["val_loss"], 4),
                           "values": m["values"]} for m in members],
              **_methods(members, arrays, seed)}
    capped = _pick(studies, CAP_VARIANT)
    if len(capped) > 1:
        variant = _methods(capped, arrays, seed)
        result["with_correlation_cap"] = {"cap": CAP_VARIANT, "members": [m["hypermodel"] for m in capped],
                                          "chosen_method": variant["chosen_method"],
                                          "chosen_test": variant["chosen_test"],
                                          "beats_best_member_on_test": variant["beats_best_member_on_test"]}
    else:
        result["with_correlation_cap"] = {"cap": CAP_VARIANT, "members": [m["hypermodel"] for m in capped],
                                          "note": "one member left: nothing to ensemble"}
    if name == "digits_images":
        # One search of one family: its top 3 are near-copies, and the weights show it.
        one = sorted(studies[0], key=lambda t: t["val_loss"])[:3]
        collapse = _methods(one, arrays, seed)
        result["collapse"] = {"study": studies[0][0]["hypermodel"], "members": [round(t["val_loss"], 4) for t in one],
                              "correlation_mean_off_diagonal": _mean_correlation(one),
                              **{k: collapse[k] for k in ("best_member", "mean", "nelder_mead", "greedy",
                                                          "chosen_method", "beats_best_member_on_test")}}
    result["correlation_mean_off_diagonal"] = _mean_correlation(members)
    result["seconds"] = round(time.perf_counter() - started, 1)
    print(f"{name} seed {seed}: best member test {result['best_member']['test']['log_loss']}, "
          f"{result['chosen_method']} test {result['chosen_test']['log_loss']} ({result['seconds']} s)",
          file=sys.stderr)
    return result


def _mean_correlation(members: list[dict]) -> float:
    from workers.ensembles import blending

    matrix = blending.correlation(np.stack([m["val"] for m in members]))
    return round(float(matrix[~np.eye(len(members), dtype=bool)].mean()), 3)


def _summary(runs: list[dict]) -> dict:
    def median(path):
        values = list(runs)
        for key in path:
            values = [v[key] for v in values]
        return round(statistics.median(values), 4)

    wins = sum(run["beats_best_member_on_test"] for run in runs)
    never_worse = {m: all(run[m].get("never_worse_than_best_member_on_validation", False) for run in runs)
                   for m in ("mean", *CHOOSABLE) if "val" in runs[0][m]}
    summary = {"seeds": [run["seed"] for run in runs],
               "best_member_test_log_loss_median": median(("best_member", "test", "log_loss")),
               "best_member_test_accuracy_median": median(("best_member", "test", "accuracy")),
               "never_worse_than_best_member_on_validation": never_worse,
               "chosen_never_worse_than_best_member_on_validation": all(
                   run[run["chosen_method"]]["never_worse_than_best_member_on_validation"] for run in runs),
               "beats_best_member_on_test_seeds": f"{wins}/{len(runs)}",
               # Over several seeds: when most of them beat the best member.
               "beats_best_member_on_test": wins * 2 > len(runs)}
    for method in ("mean", *CHOOSABLE):
        if "test" in runs[0][method]:
            summary[f"{method}_test_log_loss_median"] = median((method, "test", "log_loss"))
            summary[f"{method}_test_accuracy_median"] = median((method, "test", "accuracy"))
    summary["chosen_test_log_loss_median"] = median(("chosen_test", "log_loss"))
    return summary


def measure_recipes() -> dict:
    seeds = [int(s) for s in os.environ.get("ENSEMBLE_RECIPES_SEEDS", "1").split(",")]
    started, load_before = time.perf_counter(), os.getloadavg()
    recipes: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("digits_images", "breast_cancer", "generated"):
            arrays, info = _dataset(name)
            runs = [_one_seed(name, arrays, info, seed, Path(tmp) / name) for seed in seeds]
            recipes[name] = {"rows": {"train": len(arrays.y_train), "val": len(arrays.y_val),
                                      "test": len(arrays.y_test)},
                             "families": [f[0] for f in _families(info.kind)], **_summary(runs), "runs": runs}
    return {"setup": {
        "split": "experiments.datasets.splits.split_indices, 15 % validation, 15 % test, seed 0",
        "generated": GENERATED,
        "families": "digits_images: built-in dense and cnn; tabular: built-in dense and a team hypermodel, "
                    "benchmarks/team_hypermodels.build_logistic (L2 logistic regression), called directly as a "
                    "worker would resolve it from TUNEBOARD_HYPERMODELS",
        "search": f"random, {TRIALS} trials per study, at most {EPOCHS} epochs, patience {PATIENCE}, batch {BATCH}, "
                  "through workers.training.fitting.run_trial; each trial's member is its search checkpoint (training "
                  "split only)",
        "rule": f"top K={K} per study by val_loss, at most M={M} per hypermodel, correlation cap "
                f"{'off' if CORRELATION_CAP is None else CORRELATION_CAP} (with_correlation_cap: {CAP_VARIANT})",
        "weights": "fitted on validation predictions only; workers.ensembles.blending.without_negligible applied",
        "chosen_method": "the lowest validation loss among Nelder–Mead, greedy and stacking (stacking: its "
                         "cross-validated loss), chosen on validation, never on test",
        "threads": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS")},
        "load_average_before": [round(v, 2) for v in load_before],
        "load_average_after": [round(v, 2) for v in os.getloadavg()],
        "seconds": round(time.perf_counter() - started, 1)},
        **overall(recipes), **recipes}


def overall(recipes: dict) -> dict:
    """The summary over the datasets: the count of the per-dataset verdicts (a majority of
    seeds each), and the same count seed by seed, which may differ."""
    count = sum(recipes[name]["beats_best_member_on_test"] for name in recipes)
    never_worse = all(recipes[name]["chosen_never_worse_than_best_member_on_validation"] for name in recipes)
    seeds = recipes[next(iter(recipes))]["seeds"]
    per_seed = [sum(run["beats_best_member_on_test"] for name in recipes for run in recipes[name]["runs"]
                    if run["seed"] == seed) for seed in seeds]
    return {"target": TARGET, "beats_best_member_on_test_count": count,
            "beats_best_member_on_test_count_per_seed": dict(zip(map(str, seeds), per_seed, strict=True)),
            "beats_best_member_on_test_count_median_over_seeds": statistics.median(per_seed),
            "never_worse_than_best_member_on_validation": never_worse,
            "target_met": bool(count >= 2 and never_worse)}
