"""What it takes to reproduce a trial or a model, and how close a re-run came, from the `environment` record its
worker wrote (docs/design/distributed-search.md, "Reproducibility")."""

import math
import secrets

# Keys whose difference means the re-run did not see the same inputs, not just another machine.
INPUT_KEYS = {
    "dataset.sha256": "The dataset's stored splits changed since the original trial ran",
    "dataset.upload_sha256": "The dataset's uploaded file changed since the original trial ran",
    "hypermodel.source_sha256": "The hypermodel's code changed since the original trial ran",
    "hypermodel.version": "The hypermodel's version changed since the original trial ran",
    "seed": "The seed differs from the original trial's",
}
# Rows of a dict that say which object it was, not what it held: never a difference by themselves.
IGNORED = {"dataset.name"}


def dataset_identity(dataset) -> dict:
    """The dataset as a re-run must see it again: the hashes of its stored artifacts and its split."""
    return {
        "id": dataset.id,
        "name": dataset.name,
        "sha256": dataset.arrays.sha256,
        "upload_sha256": dataset.upload.sha256 if dataset.upload_id else None,
        "split": {"seed": dataset.split_seed, "val_fraction": dataset.val_fraction,
                  "test_fraction": dataset.test_fraction, "sizes": dict(dataset.split_sizes)},
    }


# New studies draw their seed below this: short enough to read and type again, and the trial
# numbers added to it stay far below NumPy's limit (bounds.MAX_SEED).
FRESH_SEEDS = 1_000_000


def fresh_seed() -> int:
    """A new study's seed when none is given: random, so two studies of the same settings do
    not repeat each other; kept on the study (and in each trial's environment) to run again."""
    return secrets.randbelow(FRESH_SEEDS)


def trial_seed(trial) -> int:
    """The seed the trial trained with: as recorded, else as the search derives it."""
    recorded = (trial.environment or {}).get("seed")
    return int(recorded) if recorded is not None else trial.study.seed + trial.number


def _flatten(record: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def environment_differences(original: dict, rerun: dict) -> list[dict]:
    """Every key whose value differs between two environment records, dotted
    ("versions.tensorflow", "devices.names"), with both values; a key one record lacks counts."""
    a, b = _flatten(original or {}), _flatten(rerun or {})
    return [{"key": key, "original": a.get(key), "rerun": b.get(key), "input": key in INPUT_KEYS}
            for key in sorted(set(a) | set(b)) if key not in IGNORED and a.get(key) != b.get(key)]


def _number(value) -> int | float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return value  # an int stays one (epochs), so it is printed as one


def difference(original, rerun) -> dict:
    """The re-run's value beside the original's: signed and absolute difference, and the
    absolute difference relative to the original's magnitude (None when that is 0)."""
    a, b = _number(original), _number(rerun)
    if a is None or b is None:
        return {"original": original, "rerun": rerun, "difference": None, "absolute": None, "relative": None,
                "relative_percent": None, "identical": original == rerun}
    absolute = abs(b - a)
    relative = absolute / abs(a) if a else (0.0 if absolute == 0 else None)
    return {"original": a, "rerun": b, "difference": b - a, "absolute": absolute, "relative": relative,
            "relative_percent": None if relative is None else 100 * relative, "identical": a == b}


def metric_differences(original: dict, rerun: dict) -> list[dict]:
    """One row per metric either run reports (the best epoch's logs), by name."""
    return [{"name": name, **difference(original.get(name), rerun.get(name))}
            for name in sorted(set(original or {}) | set(rerun or {}))]


def rerun_comparison(*, objective: str, original: dict, rerun: dict) -> dict:
    """How close a re-run came. `original` and `rerun`: {"score", "best_epoch", "metrics",
    "environment"} of the trial and of its finished re-run."""
    recorded = bool(original.get("environment"))
    differences = environment_differences(original.get("environment") or {}, rerun.get("environment") or {})
    notes = []
    if not recorded:
        notes.append("The original trial recorded no environment (it ran before Tuneboard kept one), so only "
                     "its results can be compared.")
    else:
        changed = {d["key"] for d in differences if d["input"]}
        notes += [message + "." for key, message in INPUT_KEYS.items() if key in changed]
    objective_row = {"name": objective, **difference(original.get("score"), rerun.get("score"))}
    return {
        "objective": objective_row,
        "best_epoch": difference(original.get("best_epoch"), rerun.get("best_epoch")),
        "metrics": metric_differences(original.get("metrics") or {}, rerun.get("metrics") or {}),
        "environment_recorded": recorded,
        "environment_differences": differences if recorded else [],
        "same_environment": recorded and not differences,
        "same_inputs": recorded and not any(d["input"] for d in differences),
        "notes": notes,
    }


def inputs_changed_since(*, trial, dataset) -> list[str]:
    """What the web can tell before a re-run trains: the dataset's stored splits are no longer
    those the trial recorded. (Code changes are only known to the worker that runs it.)"""
    recorded = (trial.environment or {}).get("dataset") or {}
    if not recorded:
        return []
    now = dataset_identity(dataset)
    changed = []
    if recorded.get("sha256") != now["sha256"]:
        changed.append(INPUT_KEYS["dataset.sha256"] + ".")
    if recorded.get("split") != now["split"]:
        changed.append("The dataset's split changed since the original trial ran.")
    return changed
