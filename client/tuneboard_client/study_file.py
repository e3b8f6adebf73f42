"""The YAML study file: the fields of the API's study create, checked before anything is
sent, every problem at once with the key it is about. `dataset:` is an id or the name of
one of the team's datasets (resolved through the API by `resolve`)."""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

INT_FIELDS = ("max_trials", "executions_per_trial", "epochs", "batch_size", "patience", "seed", "parallelism",
              "initial_random_trials", "steps_per_execution", "devices_per_trial", "pruning_startup_trials",
              "pruning_warmup_epochs", "pruning_min_trials", "pruning_min_epochs", "pruning_reduction_factor",
              "stop_patience")
# Numbers, whole or not; the ones in AT_LEAST_ZERO may not be negative.
NUMBER_FIELDS = ("pruning_percentile", "stop_target", "stop_min_delta", "stop_device_hours")
AT_LEAST_ZERO = ("stop_min_delta",)
ABOVE_ZERO = ("stop_device_hours",)
# Whole numbers that may be 0 (the others start at 1; the seed may be anything).
ZERO_ALLOWED = ("patience", "initial_random_trials", "pruning_startup_trials", "pruning_warmup_epochs")
TEXT_FIELDS = ("name", "hypermodel", "objective_metric", "precision", "jit_compile")
CHOICES = {
    "tuner": ("random", "bayesian", "hyperband", "hyperband_tpe", "grid", "optuna_tpe", "optuna_gp", "optuna_nsga2"),
    "objective_direction": ("auto", "min", "max"),
    "queue": ("cpu", "gpu", "tpu"),
    "pruner": ("none", "median", "percentile", "successive_halving", "pareto"),
}
REQUIRED = ("name", "dataset", "hypermodel", "search_space")
# Lists of mappings, checked in full by the server: [{metric, direction}] and [{metric, op, value}].
LIST_FIELDS = {"extra_objectives": ("metric", "direction"), "constraints": ("metric", "op", "value")}
FIELDS = (*REQUIRED, "tuner", "objective_metric", "objective_direction", *INT_FIELDS, "queue", "precision",
          "jit_compile", "pruner", *NUMBER_FIELDS, *LIST_FIELDS, "start")
HP_TYPES = ("int", "float", "choice", "boolean", "fixed")


class StudyFileError(Exception):
    """Everything wrong with a study file, one problem a line."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems
        super().__init__(f"{source} is not a valid study file:\n" + "\n".join(f"  - {p}" for p in problems))


def load(path: str | Path) -> dict:
    """Read and check a study file; returns its fields ("dataset" still an id or a name)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise StudyFileError(str(path), [f"cannot be read: {exc.strerror or exc}"]) from exc
    return parse(text, source=str(path))


def parse(text: str, *, source: str = "the study file") -> dict:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise StudyFileError(source, [f"is not valid YAML{where}: {problem}"]) from exc
    return validate(data, source=source)


def validate(data: Any, *, source: str = "the study file") -> dict:
    if data is None:
        raise StudyFileError(source, ["is empty: it needs at least " + ", ".join(REQUIRED) + "."])
    if not isinstance(data, dict):
        raise StudyFileError(source, [f"must be a mapping of fields (name: ..., dataset: ...), not a "
                                      f"{_kind(data)}."])
    problems: list[str] = []
    for key in data:
        if key not in FIELDS:
            close = difflib.get_close_matches(str(key), FIELDS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f"; the fields are: {', '.join(FIELDS)}"
            problems.append(f"{key}: unknown field{hint}")
    for key in REQUIRED:
        if data.get(key) in (None, "", []):
            problems.append(f"{key}: required")
    for key in TEXT_FIELDS:
        value = data.get(key)
        if value is not None and not isinstance(value, str):
            problems.append(f"{key}: must be text, not {_kind(value)} {value!r}")
        elif isinstance(value, str) and key == "name" and len(value) > 100:
            problems.append(f"name: at most 100 characters ({len(value)} given)")
    for key in INT_FIELDS:
        value = data.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            problems.append(f"{key}: must be a whole number, not {_kind(value)} {value!r}")
        elif key != "seed" and value < (0 if key in ZERO_ALLOWED else 1):
            lowest = "0 or more" if key in ZERO_ALLOWED else "1 or more"
            problems.append(f"{key}: must be {lowest}, not {value}")
    for key in NUMBER_FIELDS:
        value = data.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            problems.append(f"{key}: must be a number, not {_kind(value)} {value!r}")
        elif not math.isfinite(value):
            problems.append(f"{key}: must be a finite number, not {value!r}")
        elif key in AT_LEAST_ZERO and value < 0:
            problems.append(f"{key}: must be 0 or more, not {value}")
        elif key in ABOVE_ZERO and value <= 0:
            problems.append(f"{key}: must be more than 0, not {value}")
    delta = data.get("stop_min_delta")
    if type(delta) in (int, float) and delta > 0 and data.get("stop_patience") is None:
        problems.append("stop_min_delta: only applies with stop_patience; set it too, or leave stop_min_delta out")
    for key, choices in CHOICES.items():
        value = data.get(key)
        if value is not None and value not in choices:
            problems.append(f"{key}: must be one of {', '.join(choices)}, not {value!r}")
    dataset = data.get("dataset")
    if dataset not in (None, "") and (isinstance(dataset, bool) or not isinstance(dataset, int | str)):
        problems.append(f"dataset: must be a dataset id or name, not {_kind(dataset)}")
    elif isinstance(dataset, int) and dataset <= 0:
        problems.append(f"dataset: ids are positive, not {dataset}")
    if "start" in data and not isinstance(data["start"], bool):
        problems.append(f"start: must be true or false, not {data['start']!r}")
    for key, keys in LIST_FIELDS.items():
        rows = data.get(key)
        if rows is not None and not (isinstance(rows, list) and all(isinstance(r, dict) and set(r) == set(keys)
                                                                    for r in rows)):
            problems.append(f"{key}: must be a list of mappings with {', '.join(keys)} (e.g. - {{"
                            + ", ".join(f"{k}: ..." for k in keys) + "})")
    problems += _search_space_problems(data.get("search_space"))
    if problems:
        raise StudyFileError(source, problems)
    return dict(data)


def _search_space_problems(space: Any) -> list[str]:
    if space in (None, "", []):
        return []  # reported as required
    if not isinstance(space, list):
        return [f"search_space: must be a list of hyperparameters (- name: units ...), not {_kind(space)}"]
    problems = []
    names = set()
    for index, row in enumerate(space, start=1):
        where = f"search_space[{index}]"
        if not isinstance(row, dict):
            problems.append(f"{where}: must be a mapping (name, type, ...), not {_kind(row)}")
            continue
        name = row.get("name")
        if not isinstance(name, str) or not name.strip():
            problems.append(f"{where}: needs a name")
        else:
            where = f"search_space[{index}] ({name})"
            if name in names:
                problems.append(f"{where}: the name {name!r} is used twice")
            names.add(name)
        kind = row.get("type")
        if kind not in HP_TYPES:
            problems.append(f"{where}: type must be one of {', '.join(HP_TYPES)}, not {kind!r}")
        elif kind in ("int", "float"):
            for key in ("min", "max"):
                if row.get(key) is None:
                    problems.append(f"{where}: {key} is required for type {kind}")
        elif kind == "choice" and not (isinstance(row.get("values"), list) and row["values"]):
            problems.append(f"{where}: values must be a non-empty list for type choice")
        elif kind == "fixed" and "value" not in row:
            problems.append(f"{where}: value is required for type fixed")
    return problems


def _kind(value: Any) -> str:
    return {dict: "mapping", list: "list", str: "text", bool: "boolean", int: "number", float: "number",
            type(None): "nothing"}.get(type(value), type(value).__name__)


def resolve(fields: dict, resolve_dataset: Callable[[int | str], int]) -> tuple[dict, bool | None]:
    """The API's study-create payload (dataset as an id) and the file's `start:` (None if absent)."""
    payload = {key: value for key, value in fields.items() if key != "start"}
    payload["dataset"] = resolve_dataset(fields["dataset"])
    space = []
    for row in payload.get("search_space") or []:
        space.append({"parent": None, "parent_values": [], **row})
    payload["search_space"] = space
    return payload, fields.get("start")
