"""Comparing two to four studies of one dataset: the selections accepted and the figures pages and the API show,
built from the rows selectors.studies_compared reads."""

import math

from experiments.errors import TuneboardError
from experiments.presentation import figures, study_charts
from experiments.presentation.importance import METHOD as IMPORTANCE_METHOD
from experiments.presentation.importance import hyperparameter_importance

MIN_COMPARED, MAX_COMPARED = 2, 4
MAX_ID = 2**63 - 1  # the largest primary key PostgreSQL's bigint holds
COMPLETED = "completed"


class ComparisonError(TuneboardError):
    pass


def _picked(n: int) -> str:
    return f"Pick between {MIN_COMPARED} and {MAX_COMPARED} studies of one dataset to compare; you picked {n}."


def parse_study_ids(values: list[str]) -> list[int]:
    """The ids of the `studies` query parameter (repeated, or comma-separated), each once, in
    the order given; at most MAX_COMPARED of them. Only ASCII digits count (str.isdigit() also
    accepts '²', which int() refuses), and the length is checked before int() reads them."""
    ids: dict[int, None] = {}
    for value in values:
        for raw in value.split(","):
            raw = raw.strip()
            if not raw:
                continue
            if not (raw.isascii() and raw.isdigit() and len(raw) <= len(str(MAX_ID))) or not 0 < int(raw) <= MAX_ID:
                raise ComparisonError(f"Studies are picked by their ids, whole numbers; {raw[:20]!r} is not one.")
            ids[int(raw)] = None
    if len(ids) > MAX_COMPARED:  # refused before any query
        raise ComparisonError(_picked(len(ids)))
    return list(ids)


def check_selection(studies: list) -> None:
    """Two to four studies (the team's, already found) of one dataset."""
    if not MIN_COMPARED <= len(studies) <= MAX_COMPARED:
        raise ComparisonError(_picked(len(studies)))
    by_dataset: dict[int, list] = {}
    for study in studies:
        by_dataset.setdefault(study.dataset_id, []).append(study)
    if len(by_dataset) > 1:
        parts = "; ".join(
            f"{' and '.join(repr(s.name) for s in group)} {'use' if len(group) > 1 else 'uses'} {group[0].dataset.name}"
            for group in by_dataset.values())
        raise ComparisonError(f"Only studies of one dataset can be compared: {parts}.")


def _finite(value):
    return value if not isinstance(value, float) or math.isfinite(value) else None


def study_history(trials: list[dict], direction: str) -> dict:
    """One study's optimisation history from its trial rows (dicts with pk, number, status,
    score, in start order): each completed trial's score and the best so far, by trial number;
    the best trial's row; and the counts. A score that is not a finite number is left out."""
    completed = [t for t in trials if t["status"] == COMPLETED and t["score"] is not None and math.isfinite(t["score"])]
    drawn = study_charts.history([{**t, "trial_id": t["pk"]} for t in completed], direction)
    sign = -1 if direction == "max" else 1
    best = min(completed, key=lambda t: (sign * t["score"], t["number"]), default=None)
    return {"history": {"number": drawn["number"], "score": drawn["score"], "best": drawn["best"],
                        "trial": drawn["trial_id"], "total": drawn["total"], "shown": drawn["shown"]},
            "best": best, "completed": completed, "trials_total": len(trials), "trials_completed": len(completed)}


def objective_groups(studies: list[dict]) -> list[dict]:
    """Studies that optimise the same metric in the same direction share a y axis; each
    other objective gets its own (a val_loss and a val_accuracy are not on one scale)."""
    groups: dict[tuple, dict] = {}
    for study in studies:
        key = (study["objective_metric"], study["objective_direction"])
        groups.setdefault(key, {"metric": key[0], "direction": key[1], "studies": []})["studies"].append(study["id"])
    return list(groups.values())


def best_trial_entry(row: dict | None) -> dict | None:
    """A study's best trial as shown: its number as the product names it, its figures made JSON-safe."""
    if row is None:
        return None
    return {"id": row["pk"], "number": row["number"], "label": figures.trial_label(row["number"]).capitalize(),
            "score": row["score"], "metrics": {k: _finite(v) for k, v in sorted(row["metrics"].items())},
            "hyperparameters": {k: _finite(v) for k, v in sorted(row["hyperparameters"].items())
                                if not k.startswith("tuner/")}}


def _leader(entries: list[dict], groups: list[dict]) -> int | None:
    """The study whose best trial is best, when all share one objective."""
    if len(groups) != 1:
        return None
    scored = [e for e in entries if e["best_trial"] is not None]
    if not scored:
        return None
    sign = -1 if groups[0]["direction"] == "max" else 1
    return min(scored, key=lambda e: sign * e["best_trial"]["score"])["id"]


def side_by_side(entries: list[dict], field: str) -> list[dict]:
    """Rows of the best-trials table for `field` (metrics or hyperparameters): the union of
    names, each with one cell per study (None where that study's best trial has no such name)."""
    names = sorted({name for e in entries if e["best_trial"] for name in e["best_trial"][field]})
    return [{"name": name, "values": [(e["best_trial"] or {}).get(field, {}).get(name) for e in entries]}
            for name in names]


def comparison(*, studies: list[dict], histories: dict[int, dict], best_rows: dict[int, dict],
               importance_trials: dict[int, list[dict]]) -> dict:
    """Everything the comparison page and the API show of the picked studies, from the rows the selector read."""
    groups = objective_groups(studies)
    entries = []
    for study in studies:
        history = histories[study["id"]]
        best = best_rows.get(history["best"]["pk"]) if history["best"] else None
        entries.append({**study, "history": history["history"], "trials_total": history["trials_total"],
                        "trials_completed": history["trials_completed"], "best_trial": best_trial_entry(best),
                        "importance": hyperparameter_importance(importance_trials.get(study["id"], []))})
    return {
        "objectives": groups,
        "objectives_differ": len(groups) > 1,
        "leader": _leader(entries, groups),
        "importance_method": IMPORTANCE_METHOD,
        "metrics": side_by_side(entries, "metrics"),
        "hyperparameters": side_by_side(entries, "hyperparameters"),
        "studies": entries,
    }
