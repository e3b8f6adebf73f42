"""The study page's chart data from trial rows, in the web process with numpy only, downsampled so a 10,000-trial
study still answers in milliseconds."""

import heapq
import math

import numpy as np

from experiments.presentation import chart_ticks

MAX_HISTORY_POINTS = 2000
MAX_CURVE_POINTS = 100
MAX_PARALLEL_TRIALS = 1000  # also the sample importance is estimated on
DEFAULT_PARALLEL_AXES = 6  # more crowd a chart a page wide; the user adds others
IMPORTANCE_BINS = 8


def downsample_indices(n: int, limit: int, keep: set[int] | None = None) -> list[int]:
    """Evenly spaced indices (first and last included) plus any in `keep`, at most about `limit`."""
    if n <= limit:
        return list(range(n))
    chosen = set(np.linspace(0, n - 1, limit).round().astype(int).tolist()) | (keep or set())
    return sorted(chosen)


def history(trials: list[dict], direction: str) -> dict:
    """Scores in start order and the best-so-far line. `trials`: dicts with number, score,
    status, trial_id (completed ones carry a score) and feasible (an infeasible trial, one that
    broke a constraint, is shown but never the best so far)."""
    numbers, scores, best_line, improved = [], [], [], set()
    best = None
    for i, trial in enumerate(trials):
        score = trial["score"]
        if score is not None and math.isfinite(score) and trial.get("feasible") is not False:
            if best is None or (score < best if direction == "min" else score > best):
                best = score
                improved.add(i)
        numbers.append(trial["number"])
        scores.append(score)
        best_line.append(best)
    keep = downsample_indices(len(trials), MAX_HISTORY_POINTS, improved)  # every improvement stays visible
    return {
        "number": [numbers[i] for i in keep],
        "score": [scores[i] for i in keep],
        "best": [best_line[i] for i in keep],
        "trial_id": [trials[i]["trial_id"] for i in keep],
        "total": len(trials),
        "shown": len(keep),
    }


def curves(epochs: list[dict], labels: dict[int, str]) -> list[dict]:
    """Train and validation loss per trial, each downsampled to MAX_CURVE_POINTS epochs.
    `epochs`: dicts with trial_id (pk), execution, epoch, metrics, ordered by trial and epoch."""
    by_trial: dict[int, list[dict]] = {}
    for row in epochs:
        if row["execution"] == 0:
            by_trial.setdefault(row["trial_id"], []).append(row)
    series = []
    for trial_pk, rows in by_trial.items():
        keep = downsample_indices(len(rows), MAX_CURVE_POINTS)
        picked = [rows[i] for i in keep]
        series.append({
            "trial": labels.get(trial_pk, str(trial_pk)),
            "epoch": [r["epoch"] + 1 for r in picked],
            "loss": [r["metrics"].get("loss") for r in picked],
            "val_loss": [r["metrics"].get("val_loss") for r in picked],
        })
    return series


MAX_LEARNING_CURVE_POINTS = 300
TASK_METRIC = {"classification": "accuracy", "regression": "mae"}


def series_by(rows: list[dict], field: str, label) -> list[dict]:
    """Epoch rows (dicts with epoch, metrics and `field`) split into one series per value of
    `field` (a phase, an execution), in the order they first appear; `label(value)` names each."""
    groups: dict = {}
    for row in rows:
        groups.setdefault(row[field], []).append(row)
    return [{"name": label(value), "rows": sorted(group, key=lambda r: r["epoch"])} for value, group in groups.items()]


def learning_curves(series: list[dict], *, task: str, marks: list[dict] | None = None) -> dict:
    """Loss and the task's metric per epoch (1-based), train and validation, for each series of
    series_by; `marks` are epochs to draw a line at (best epoch, cap). Long runs are downsampled
    to MAX_LEARNING_CURVE_POINTS, keeping the marked epochs."""
    names = {name for s in series for row in s["rows"] for name in row["metrics"]}
    metric = TASK_METRIC.get(task, "accuracy")
    if metric not in names:  # a team hypermodel may report something else
        metric = next((n for n in sorted(names) if n != "loss" and not n.startswith("val_")), metric)
    marks = [m for m in (marks or []) if m.get("epoch")]
    drawn = []
    for s in series:
        rows = s["rows"]
        keep = {i for i, row in enumerate(rows) if any(row["epoch"] + 1 == m["epoch"] for m in marks)}
        picked = [rows[i] for i in downsample_indices(len(rows), MAX_LEARNING_CURVE_POINTS, keep)]

        def column(name, picked=picked):
            values = [r["metrics"].get(name) for r in picked]
            return values if any(v is not None for v in values) else None

        drawn.append({"name": s["name"], "epoch": [r["epoch"] + 1 for r in picked], "loss": column("loss"),
                      "val_loss": column("val_loss"), "metric": column(metric), "val_metric": column(f"val_{metric}"),
                      "total": len(rows)})
    return {"metric": metric, "series": drawn, "marks": marks}


def varying_hyperparameters(trials: list[dict]) -> list[str]:
    """Names whose value differs between finished trials (Fixed ones and tuner/* bookkeeping
    tell nothing). A name missing from some trials (conditional) varies too."""
    first: dict[str, object] = {}
    varying: set[str] = set()
    for i, trial in enumerate(trials):
        hp = trial["hyperparameters"]
        for name, value in hp.items():
            if name in varying or name.startswith("tuner/"):
                continue
            if name not in first:
                first[name] = value
                if i:
                    varying.add(name)
            elif value != first[name] or type(value) is not type(first[name]):
                varying.add(name)
        if len(hp) < len(first):
            varying.update(name for name in first if name not in hp)
    return sorted(varying)


def json_key(value) -> str:
    return repr(value)


def _display(key: str) -> str:
    """A category as people wrote it: relu, not 'relu'."""
    return key[1:-1] if len(key) >= 2 and key[0] == key[-1] and key[0] in "'\"" else key


def _encoded(values: list) -> tuple[np.ndarray, list | None]:
    """Numbers stay numbers (NaN where absent); anything else becomes a category index."""
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values if v is not None):
        return np.array([np.nan if v is None else float(v) for v in values]), None
    categories = sorted({json_key(v) for v in values})
    index = {c: i for i, c in enumerate(categories)}
    return np.array([float(index[json_key(v)]) for v in values]), categories


def parallel_coordinates(trials: list[dict], names: list[str], log_names: frozenset = frozenset(),
                         ranking: list[dict] | None = None) -> dict:
    """Parallel-coordinates dimensions, one per varying hyperparameter and the score, the most important shown first so
    a dozen axes do not crowd each other out."""
    keep = downsample_indices(len(trials), MAX_PARALLEL_TRIALS)
    sample = [trials[i] for i in keep]
    dimensions = []
    for name in names:
        values, categories = _encoded([t["hyperparameters"].get(name) for t in sample])
        log = categories is None and name in log_names and np.nanmin(values, initial=np.inf) > 0
        if log:
            values = np.log10(values)
        dimension = {"name": name, "label": chart_ticks.short(name), "log": bool(log),
                     "values": [None if math.isnan(v) else round(v, 6) for v in values.tolist()]}
        if categories is not None:
            dimension["tickvals"] = list(range(len(categories)))
            dimension["ticktext"] = [chart_ticks.short(_display(c)) for c in categories]
        elif not np.isnan(values).all():
            low, high = float(np.nanmin(values)), float(np.nanmax(values))
            dimension.update(chart_ticks.log_ticks(low, high) if log else chart_ticks.linear_ticks(low, high))
        dimensions.append(dimension)
    order = [row["name"] for row in ranking or [] if row["name"] in names]
    order += [name for name in names if name not in order]
    scores = [t["score"] for t in sample]
    finite = [s for s in scores if s is not None and math.isfinite(s)]
    score = {"name": "score", "label": "score", "values": scores,
             **(chart_ticks.linear_ticks(min(finite), max(finite)) if finite else {})}
    return {"dimensions": dimensions, "score": score, "order": order, "default": order[:DEFAULT_PARALLEL_AXES],
            "shown": len(sample), "total": len(trials)}


def importance(trials: list[dict], names: list[str]) -> list[dict]:
    """Main-effect importance (the first-order term of fANOVA): for each hyperparameter, the
    share of the score's variance explained by the mean score per value (numbers binned into
    quantiles). Shares are normalised to sum to 1 across hyperparameters."""
    scores = np.array([t["score"] for t in trials], dtype=float)
    if len(scores) < 3 or not np.isfinite(scores).all() or scores.var() == 0:
        return []
    total = scores.var()
    raw = {}
    for name in names:
        values, categories = _encoded([t["hyperparameters"].get(name) for t in trials])
        if categories is None:
            present = ~np.isnan(values)
            groups = np.full(len(values), -1)
            if present.sum() > 1:
                edges = np.unique(np.quantile(values[present], np.linspace(0, 1, IMPORTANCE_BINS + 1)))
                groups[present] = np.clip(np.searchsorted(edges, values[present], side="right") - 1, 0,
                                          max(0, len(edges) - 2))
        else:
            groups = values.astype(int)
        explained = 0.0
        for group in np.unique(groups):
            members = scores[groups == group]
            explained += len(members) * (members.mean() - scores.mean()) ** 2
        raw[name] = explained / len(scores) / total
    norm = sum(raw.values()) or 1.0
    return sorted(({"name": n, "importance": round(v / norm, 4)} for n, v in raw.items()),
                  key=lambda row: -row["importance"])


def eta_seconds(*, durations: list[float], remaining: int, running_elapsed: list[float], slots: int) -> float | None:
    """When the last trial should end, from the median observed duration and the study's free slots; None without
    durations or slots."""
    if remaining <= 0 and not running_elapsed:
        return 0.0
    if not durations or slots <= 0:
        return None
    median = float(np.median(durations))
    free_at = sorted(max(1.0, median - elapsed) for elapsed in running_elapsed)
    free_at = free_at[:slots] + [0.0] * max(0, slots - len(free_at))
    heapq.heapify(free_at)
    for _ in range(max(0, remaining)):
        heapq.heappush(free_at, heapq.heappop(free_at) + median)
    return max(free_at)