"""Hyperparameter importance for the study comparison from a seeded forest of extremely randomised trees, which
also credits a hyperparameter that matters only together with another."""

import math

import numpy as np

from experiments.presentation.study_charts import downsample_indices

MIN_TRIALS = 5
MAX_TRIALS = 500  # an even sample of a larger study: the ranking settles long before this
TREES = 100
SEED = 0
LEAF = 2  # no leaf fitted to one trial's noise
METHOD = (f"Importance is each hyperparameter's share of the impurity decrease in a forest of {TREES} extremely "
          "randomised trees (fixed seed) fitted to the completed trials' scores, categories one-hot encoded and "
          "summed back; a hyperparameter that never varies scores 0.")
NOT_ENOUGH = f"Not enough trials: importance needs at least {MIN_TRIALS} completed trials with a score."
NO_SPREAD = "Every completed trial scored the same, so no hyperparameter explains anything."
NO_HYPERPARAMETERS = "The completed trials record no hyperparameters."


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _columns(values: list) -> tuple[np.ndarray, int]:
    """One hyperparameter's values as feature columns, and how many columns it takes.
    Numbers stay one column, an absent value (a conditional hyperparameter) set apart below
    the smallest; anything else (text, booleans, a mix) is one-hot, absent being all zeros."""
    present = [v for v in values if v is not None]
    if present and all(_is_number(v) and math.isfinite(v) for v in present):
        low, high = min(present), max(present)
        missing = low - (high - low) - 1.0
        column = np.array([missing if v is None else float(v) for v in values])
        return column.reshape(-1, 1), 1
    categories = sorted({repr(v) for v in present})
    index = {c: i for i, c in enumerate(categories)}
    onehot = np.zeros((len(values), max(1, len(categories))))
    for row, value in enumerate(values):
        if value is not None:
            onehot[row, index[repr(value)]] = 1.0
    return onehot, onehot.shape[1]


def hyperparameter_names(trials: list[dict]) -> list[str]:
    """Every hyperparameter any trial recorded, KerasTuner's tuner/* bookkeeping aside."""
    return sorted({name for t in trials for name in t["hyperparameters"] if not name.startswith("tuner/")})


def sample(trials: list[dict], limit: int = MAX_TRIALS) -> list[dict]:
    """An even sample of at most `limit` trials, the first and last included."""
    return [trials[i] for i in downsample_indices(len(trials), limit)]


def hyperparameter_importance(trials: list[dict]) -> dict:
    """`trials`: dicts with `hyperparameters` and `score`, the completed trials of one study.
    Returns {"rows": [{"name", "importance"}] (shares summing to 1, largest first, or all 0),
    "trials": how many were used, "message": why there are no shares ("" when there are)}."""
    usable = [t for t in trials if t["score"] is not None and math.isfinite(t["score"])]
    usable = sample(usable)
    names = hyperparameter_names(usable)
    result = {"rows": [], "trials": len(usable), "message": ""}
    if len(usable) < MIN_TRIALS:
        return {**result, "message": NOT_ENOUGH}
    if not names:
        return {**result, "message": NO_HYPERPARAMETERS}
    scores = np.array([t["score"] for t in usable], dtype=float)
    if np.ptp(scores) == 0:
        return {**result, "rows": [{"name": n, "importance": 0.0} for n in names], "message": NO_SPREAD}

    blocks, widths = zip(*(_columns([t["hyperparameters"].get(n) for t in usable]) for n in names), strict=True)
    features = np.hstack(blocks)
    # Imported here: scikit-learn takes a moment to load and only this page needs it.
    from sklearn.ensemble import ExtraTreesRegressor

    forest = ExtraTreesRegressor(n_estimators=TREES, min_samples_leaf=LEAF, random_state=SEED, n_jobs=1)
    forest.fit(features, scores)
    per_column = forest.feature_importances_
    shares, start = {}, 0
    for name, width in zip(names, widths, strict=True):
        shares[name] = float(per_column[start:start + width].sum())
        start += width
    total = sum(shares.values()) or 1.0
    rows = [{"name": n, "importance": round(v / total, 4)} for n, v in shares.items()]
    return {**result, "rows": sorted(rows, key=lambda r: (-r["importance"], r["name"]))}
