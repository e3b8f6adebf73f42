"""Search spaces as the web stores them, validated by KerasTuner 1.4.8's rules (and a few stricter) without
importing it, so nothing accepted here fails later on a worker."""

import math
import re
from collections import defaultdict

from experiments.errors import TuneboardError
from experiments.tuning.bounds import MAX_CHOICES, MAX_GRID_STEPS, MAX_HP_INT, MAX_HP_MAGNITUDE

MAX_ROWS = 100
MAX_NAME_LENGTH = 64
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
TYPES = ("int", "float", "choice", "boolean", "fixed")
SAMPLINGS = {"int": ("linear", "log"), "float": ("linear", "log", "reverse_log")}
ROW_KEYS = {
    "int": ("name", "type", "min", "max", "step", "sampling", "parent", "parent_values"),
    "float": ("name", "type", "min", "max", "step", "sampling", "parent", "parent_values"),
    "choice": ("name", "type", "values", "ordered", "parent", "parent_values"),
    "boolean": ("name", "type", "parent", "parent_values"),
    "fixed": ("name", "type", "value", "parent", "parent_values"),
}

# The same patterns live in static/js/search_space_editor.js so that text typed in the
# browser and text parsed here get the same types. Python's float() alone would also take
# "1_000", "inf" and "nan", which JavaScript's Number() does not.
_INT_TEXT = re.compile(r"[+-]?[0-9]+\Z")  # [0-9], as JavaScript's \d: Python's \d takes any Unicode digit
_FLOAT_TEXT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\Z")
_BOOL_TEXT = {"true": True, "false": False}


class SearchSpaceError(TuneboardError, ValueError):
    """Everything wrong with a search space at once, so the editor can show it row by row."""

    def __init__(self, row_errors: dict[int, list[str]], general: list[str]):
        self.row_errors = row_errors  # 0-based row index -> messages
        self.general = general  # messages not tied to one row
        super().__init__("; ".join(self.messages()))

    def messages(self) -> list[str]:
        """A flat list, for places that cannot show errors next to each row."""
        flat = list(self.general)
        for index in sorted(self.row_errors):
            flat += [f"Hyperparameter {index + 1}: {m}" for m in self.row_errors[index]]
        return flat


class InvalidValue(Exception):
    """One field's problem, collected into its row's messages."""


# --- Scalars ------------------------------------------------------------------------------


def _text_kind(text: str) -> str:
    if text.lower() in _BOOL_TEXT:
        return "bool"
    if _INT_TEXT.match(text):
        return "int"
    if _FLOAT_TEXT.match(text):
        return "float"
    return "str"


def parse_choice_values(text: str) -> list:
    """Comma-separated text -> a typed list with one type for the whole list, since KerasTuner refuses a Choice mixing
    types."""
    items = [item.strip() for item in str(text).split(",")]
    items = [item for item in items if item]
    kinds = {_text_kind(item) for item in items}
    if kinds == {"bool"}:
        return [_BOOL_TEXT[item.lower()] for item in items]
    if kinds == {"int"}:
        return [int(item) for item in items]
    if kinds and kinds <= {"int", "float"}:
        return [float(item) for item in items]
    return items


def scalar_kind(value: object) -> str | None:
    # bool before int: True is an int to Python, but not to a person filling in a form.
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    return None


def format_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"'{value}'"
    return str(value)


def _blank(value: object) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _to_number(value: object, label: str, whole: bool) -> int | float:
    """A number from JSON or from form text ("32"): an int when `whole`, else a float."""
    if isinstance(value, str):
        text = value.strip()
        kind = _text_kind(text)
        if kind not in ("int", "float"):
            raise InvalidValue(f"{label} must be a number, not {value!r}.")
        if len(text) > 100:  # int() refuses over 4,300 digits; no bound here needs more than a few
            raise InvalidValue(f"{label} is too large ({len(text):,} characters).")
        value = int(text) if kind == "int" else float(text)
    if scalar_kind(value) not in ("int", "float"):
        raise InvalidValue(f"{label} must be a number, not {format_value(value)}.")
    if not math.isfinite(value):
        raise InvalidValue(f"{label} must be a finite number.")
    if whole and abs(value) > MAX_HP_INT:
        raise InvalidValue(f"{label} must be at most {MAX_HP_INT:,} in size, not {value:.4g}.")
    if abs(value) > MAX_HP_MAGNITUDE:
        raise InvalidValue(f"{label} must be at most {MAX_HP_MAGNITUDE:.0e} in size, not {value:.4g}.")
    if not whole:
        return float(value)
    if value != int(value):
        raise InvalidValue(f"{label} must be a whole number for an Int, not {value}.")
    return int(value)


def _coerce(value: object, kind: str, label: str) -> object:
    """Bring one condition value (often typed as text) to its parent's value type."""
    if kind in ("int", "float"):
        return _to_number(value, label, whole=kind == "int")
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _BOOL_TEXT:
            return _BOOL_TEXT[value.strip().lower()]
        raise InvalidValue(f"{label} must be true or false, not {format_value(value)}.")
    if isinstance(value, str):
        return value.strip()
    if scalar_kind(value) in ("int", "float"):  # the editor infers 32 from "32"
        return str(value)
    raise InvalidValue(f"{label} must be text, not {format_value(value)}.")


# --- One row ------------------------------------------------------------------------------


def _name(raw: dict, errors: list[str]) -> str | None:
    name = raw.get("name")
    name = name.strip() if isinstance(name, str) else name
    if _blank(name):
        errors.append("Give this hyperparameter a name.")
    elif not isinstance(name, str) or not NAME_RE.match(name):
        errors.append(
            f"The name {format_value(name)} is not valid: start with a letter or underscore and use "
            "only letters, digits and underscores (like learning_rate)."
        )
    elif len(name) > MAX_NAME_LENGTH:
        errors.append(f"The name is {len(name)} characters long; the limit is {MAX_NAME_LENGTH}.")
    else:
        return name
    return None


def _numeric(raw: dict, type_: str, errors: list[str]) -> dict:
    label = "an Int" if type_ == "int" else "a Float"
    spec: dict = {}
    for key in ("min", "max", "step"):
        if _blank(raw.get(key)):
            spec[key] = None
            if key != "step":
                errors.append(f"{key.capitalize()} is required for {label}.")
            continue
        try:
            spec[key] = _to_number(raw[key], key.capitalize(), whole=type_ == "int")
        except InvalidValue as exc:
            errors.append(str(exc))
    sampling = raw.get("sampling")
    sampling = sampling.strip().lower() if isinstance(sampling, str) else sampling
    spec["sampling"] = sampling = sampling or "linear"
    if sampling not in SAMPLINGS[type_]:
        errors.append(
            f"Sampling {format_value(sampling)} is not available for {label}; "
            f"use {', '.join(SAMPLINGS[type_][:-1])} or {SAMPLINGS[type_][-1]}."
        )
    if not errors:
        _check_range(spec, errors)
    return spec


def _check_range(spec: dict, errors: list[str]) -> None:
    low, high, step, sampling = spec["min"], spec["max"], spec["step"], spec["sampling"]
    if low > high:
        errors.append(f"Min ({low}) is greater than max ({high}).")
        return
    if low == high:
        errors.append(f"Min and max are both {low}; use a Fixed hyperparameter for one value.")
        return
    if sampling != "linear" and low <= 0:
        errors.append(f"{sampling} sampling needs a min greater than 0 (min is {low}).")
        return
    if step is None:
        return
    if sampling == "linear":
        if step <= 0:
            errors.append(f"Step must be greater than 0 (it is {step}).")
        elif (high - low) / step > MAX_GRID_STEPS:
            errors.append(f"Step {step} makes more than {MAX_GRID_STEPS:,} steps from {low} to {high}; "
                          "use a larger step, or none to sample freely.")
        elif step > high - low:
            errors.append(
                f"Step {step} is larger than the range {low} to {high}, "
                f"so only {low} would ever be tried."
            )
    # KerasTuner: with log sampling the step is a multiplier and must be greater than 1.
    elif step <= 1:
        errors.append(
            f"With {sampling} sampling the step multiplies each value, so it must be greater "
            f"than 1 (it is {step}); leave it empty to sample freely."
        )
    elif math.log(high / low) / math.log(step) > MAX_GRID_STEPS:
        errors.append(f"Step {step} makes more than {MAX_GRID_STEPS:,} steps from {low} to {high}; "
                      "use a larger step, or none to sample freely.")
    elif step > high / low:
        errors.append(
            f"Step {step} multiplies {low} past the max {high}, "
            f"so only {low} would ever be tried."
        )


def _choice(raw: dict, errors: list[str]) -> dict:
    values = raw.get("values")
    if isinstance(values, str):
        values = parse_choice_values(values)
    if not isinstance(values, list):
        errors.append("Values must be a list, like relu, tanh.")
        return {"values": [], "ordered": False}
    values = [v.strip() if isinstance(v, str) else v for v in values]
    kinds = {scalar_kind(v) for v in values}
    if kinds == {"int", "float"}:
        # JSON.stringify writes 1.0 as 1, so a list of floats can arrive with ints in it.
        values, kinds = [float(v) for v in values], {"float"}
    if not values:
        errors.append("Give at least one value to choose from.")
    elif len(values) > MAX_CHOICES:
        errors.append(f"A Choice can have at most {MAX_CHOICES:,} values, not {len(values):,}.")
    elif None in kinds:
        errors.append("Values must be numbers, text or true/false.")
    elif len(kinds) > 1:
        errors.append(
            "Values must all be of one type (all numbers, all text or all true/false); "
            f"got {', '.join(format_value(v) for v in values)}."
        )
    elif "" in values:
        errors.append("One of the values is blank.")
    elif any(isinstance(v, float) and not math.isfinite(v) for v in values):
        errors.append("Values must be finite numbers.")
    else:
        repeated = [v for i, v in enumerate(values) if v in values[:i]]
        if repeated:
            shown = ", ".join(dict.fromkeys(format_value(v) for v in repeated))
            errors.append(f"Each value may appear only once; repeated: {shown}.")
    numeric = bool(kinds) and kinds <= {"int", "float"}
    ordered = raw.get("ordered")
    if isinstance(ordered, str):  # from a form: "on", "true", "false" or ""
        text = ordered.strip().lower()
        ordered = None if not text else text in ("true", "on", "1", "yes")
    ordered = numeric if ordered is None else bool(ordered)  # KerasTuner's default
    if ordered and not numeric and not errors:
        errors.append("Only numbers can be ordered; untick Ordered.")
    return {"values": values, "ordered": ordered}


def _fixed(raw: dict, errors: list[str]) -> dict:
    value = raw.get("value")
    value = value.strip() if isinstance(value, str) else value
    if _blank(value):
        errors.append("Give the fixed value.")
    elif scalar_kind(value) is None:
        errors.append("The fixed value must be a number, text or true/false.")
    elif isinstance(value, float) and not math.isfinite(value):
        errors.append("The fixed value must be a finite number.")
    return {"value": value}


def _condition(raw: dict, errors: list[str]) -> dict:
    parent = raw.get("parent")
    parent = parent.strip() if isinstance(parent, str) else parent
    if _blank(parent):
        return {"parent": None, "parent_values": []}
    if not isinstance(parent, str):
        errors.append("'Only when' must name another hyperparameter.")
        return {"parent": None, "parent_values": []}
    values = raw.get("parent_values")
    if isinstance(values, str):
        values = [item.strip() for item in values.split(",") if item.strip()]
    if values is None:
        values = []
    if not isinstance(values, list):
        errors.append(f"The values of {parent} must be a list.")
        values = []
    elif not values:
        errors.append(f"Say for which values of {parent} this hyperparameter is used.")
    return {"parent": parent, "parent_values": values}


def _row(raw: object) -> tuple[dict | None, list[str]]:
    if not isinstance(raw, dict):
        return None, ["Each hyperparameter must be an object with a name and a type."]
    errors: list[str] = []
    name = _name(raw, errors)
    type_ = raw.get("type")
    type_ = type_.strip().lower() if isinstance(type_, str) else type_
    spec: dict = {}
    if _blank(type_):
        errors.append("Choose a type.")
    elif type_ not in TYPES:
        errors.append(f"Type {format_value(type_)} is unknown; use Int, Float, Choice, Boolean or Fixed.")
    elif type_ in ("int", "float"):
        spec = _numeric(raw, type_, errors)
    elif type_ == "choice":
        spec = _choice(raw, errors)
    elif type_ == "fixed":
        spec = _fixed(raw, errors)
    row = {"name": name, "type": type_, **spec, **_condition(raw, errors)}
    return row, errors


# --- Across rows --------------------------------------------------------------------------


def _loop_from(rows: list, first: dict[str, int], start: int) -> list[str] | None:
    """The names round a parent loop through row `start`, or None if it is not in one."""
    path = [rows[start]["name"]]
    current = rows[start]["parent"]
    while current in first and current not in path:
        path.append(current)
        current = rows[first[current]]["parent"]
    return path + [current] if current == path[0] else None


def value_possible(row: dict, value: object) -> bool:
    """Whether a (coerced) value is one the row can take, for conditions on it."""
    if row["type"] == "choice":
        return value in row["values"]
    if row["type"] == "fixed":
        return value == row["value"]
    if row["type"] == "boolean":
        return True
    low, high, step = row["min"], row["max"], row["step"]
    if not low <= value <= high:
        return False
    if step is None:
        return True  # any integer in range (log without step samples freely)
    if row["sampling"] == "linear":
        return (value - low) % step == 0
    return value in [int(v) for v in log_grid(low, high, step)]


def _parent_kind(parent: dict) -> str:
    if parent["type"] == "choice":
        return scalar_kind(parent["values"][0]) or "str"
    if parent["type"] == "fixed":
        return scalar_kind(parent["value"]) or "str"
    return {"int": "int", "boolean": "bool"}[parent["type"]]


def _condition_values(parent: dict, values: list) -> list:
    name = parent["name"]
    if parent["type"] == "float":
        # KerasTuner matches conditions by ==, and sampled floats (0.30000000000000004) are
        # not exact, so such a condition would silently never hold.
        raise InvalidValue(
            f"Conditions on a Float are not supported; make {name} a Choice of numbers."
        )
    kind = _parent_kind(parent)
    coerced = [_coerce(v, kind, f"The value {format_value(v)} of {name}") for v in values]
    impossible = [format_value(v) for v in coerced if not value_possible(parent, v)]
    if impossible:
        if parent["type"] == "int":
            hint = f"it runs from {parent['min']} to {parent['max']}"
            hint += f" with step {parent['step']}" if parent["step"] else ""
        elif parent["type"] == "choice":
            hint = "it can be " + ", ".join(format_value(v) for v in parent["values"])
        else:
            hint = f"it is always {format_value(parent['value'])}"
        raise InvalidValue(f"{name} never takes {', '.join(impossible)} ({hint}).")
    return list(dict.fromkeys(coerced))  # drop repeats, keep order


def _check_names(rows: list, errors: dict[int, list[str]]) -> dict[str, int]:
    first: dict[str, int] = {}
    for index, row in enumerate(rows):
        if row is None or row["name"] is None:
            continue
        if row["name"] in first:
            errors[index].append(f"Another hyperparameter is already named {row['name']}.")
        else:
            first[row["name"]] = index
    return first


def _check_conditions(rows: list, first: dict[str, int], errors: dict[int, list[str]]) -> None:
    sound = {i for i, row in enumerate(rows) if row is not None and not errors[i]}
    for index, row in enumerate(rows):
        if row is None or row["parent"] is None:
            continue
        parent = row["parent"]
        if parent == row["name"]:
            errors[index].append("A hyperparameter cannot depend on itself.")
        elif parent not in first:
            errors[index].append(f"'Only when' refers to {parent}, which is not in this space.")
        elif loop := _loop_from(rows, first, index):
            errors[index].append(f"The conditions go round in a loop: {' → '.join(loop)}.")
        elif first[parent] in sound and row["parent_values"]:
            try:
                row["parent_values"] = _condition_values(rows[first[parent]], row["parent_values"])
            except InvalidValue as exc:
                errors[index].append(str(exc))


def validate_search_space(rows: object) -> list[dict]:
    """Normalised rows (canonical keys, typed values), or SearchSpaceError with every problem."""
    if not isinstance(rows, list):
        raise SearchSpaceError({}, ["The search space must be a list of hyperparameters."])
    if not rows:
        raise SearchSpaceError({}, ["Add at least one hyperparameter."])
    if len(rows) > MAX_ROWS:
        message = f"A search space can have at most {MAX_ROWS} hyperparameters, not {len(rows)}."
        raise SearchSpaceError({}, [message])
    errors: dict[int, list[str]] = defaultdict(list)
    normalised = []
    for index, raw in enumerate(rows):
        row, row_errors = _row(raw)
        normalised.append(row)
        errors[index] += row_errors
    first = _check_names(normalised, errors)
    _check_conditions(normalised, first, errors)
    errors = {index: messages for index, messages in errors.items() if messages}
    if errors:
        raise SearchSpaceError(errors, [])
    return normalised


def parents_first(rows: list[dict]) -> list[dict]:
    """Valid rows reordered so every parent comes before its children (otherwise stable)."""
    by_name = {row["name"]: row for row in rows}
    ordered: list[dict] = []
    placed: set[str] = set()

    def place(row: dict) -> None:
        if row["name"] in placed:
            return
        if row["parent"]:
            place(by_name[row["parent"]])
        placed.add(row["name"])
        ordered.append(row)

    for row in rows:
        place(row)
    return ordered


def log_grid(low: float, high: float, step: float) -> list[float]:
    # KerasTuner's Numerical._get_n_values / _get_value_by_index for log sampling.
    count = int(math.log(high / low, step) + 1e-8) + 1
    return [low * math.pow(step, i) for i in range(count)]
