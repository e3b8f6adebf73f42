"""The values a validated search space admits (grid size, defaults, fitting a stored configuration back in): pure
functions over search_space.py's rows, without KerasTuner."""

import math
from collections import defaultdict
from dataclasses import dataclass, field

from experiments.errors import TuneboardError
from experiments.tuning.search_space import (
    InvalidValue,
    format_value,
    log_grid,
    parents_first,
    scalar_kind,
    value_possible,
)


def _value_count(row: dict) -> int:
    """How many values GridSearch tries for one row, computed the way KerasTuner does."""
    if row["type"] == "choice":
        return len(row["values"])
    if row["type"] == "boolean":
        return 2
    if row["type"] == "fixed":
        return 1
    low, high, step = row["min"], row["max"], row["step"]
    if row["type"] == "int" and step is None:
        if row["sampling"] == "linear":
            return high - low + 1  # KerasTuner's Int defaults step to 1 for linear
        # Int with log sampling and no step: GridSearch tries 10 evenly spread samples.
        samples = {int(low * math.pow((high + 1) / low, i * 0.1 + 0.05)) for i in range(10)}
        return len(samples)
    if row["sampling"] == "linear":
        # Floor division on floats, like KerasTuner: 0.0 to 0.5 by 0.1 gives 5 values, not 6.
        return int((high - low) // step + 1)
    return len(log_grid(low, high, step))


def grid_size(rows: list[dict]) -> int | None:
    """Number of combinations GridSearch would try (None when a Float has no step), conditional rows multiplying only
    their parents' values."""
    if any(row["type"] == "float" and row["step"] is None for row in rows):
        return None
    children: dict[str | None, list[dict]] = defaultdict(list)
    for row in rows:
        children[row["parent"]].append(row)

    def combinations(row: dict) -> int:
        total = _value_count(row)
        kids = children[row["name"]]
        for value in dict.fromkeys(v for kid in kids for v in kid["parent_values"]):
            product = 1
            for kid in kids:
                if value in kid["parent_values"]:
                    product *= combinations(kid)
            total += product - 1  # this value alone was counted once in _value_count
        return total

    return math.prod(combinations(row) for row in children[None])


INITIAL_RANDOM_SHARE = 4  # at most a quarter of the budget goes to random initial trials


def default_initial_random_trials(rows: list[dict], max_trials: int | None = None) -> int:
    """Random trials before the Gaussian process guides a Bayesian study: KerasTuner's rule capped at a quarter of the
    budget, so small studies are not all random."""
    initial = 3 * len(rows)
    if max_trials:
        initial = min(initial, max_trials // INITIAL_RANDOM_SHARE)
    return max(initial, 3)


# --- Configurations -----------------------------------------------------------------------


class ConfigurationError(TuneboardError, ValueError):
    """Why a set of values does not fit a search space, one message per hyperparameter."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__(" ".join(problems))


@dataclass
class FittedConfiguration:
    values: dict  # the active hyperparameters' values, as KerasTuner would hold them
    defaults: list[str] = field(default_factory=list)  # active, absent from the configuration
    dropped: list[str] = field(default_factory=list)  # given, but inactive under its parents' values


def row_default(row: dict) -> object:
    """The value KerasTuner gives the row when nothing chose one (workers/tuners/hyperparameters.py
    declares no defaults: Int and Float start at min, a Choice at its first value)."""
    if row["type"] in ("int", "float"):
        return row["min"]
    if row["type"] == "choice":
        return row["values"][0]
    if row["type"] == "fixed":
        return row["value"]
    return False


def _range_text(row: dict) -> str:
    text = f"{format_value(row['min'])} to {format_value(row['max'])}"
    if row["step"] is not None:
        text += f" by {'×' if row['sampling'] != 'linear' else ''}{format_value(row['step'])}"
    return text


def _on_float_steps(row: dict, value: float) -> bool:
    low, step = row["min"], row["step"]
    if step is None:
        return True
    if row["sampling"] == "linear":
        grid = [low + step * round((value - low) / step)]
    else:
        grid = log_grid(low, row["max"], step)
    return any(math.isclose(value, point, rel_tol=1e-9, abs_tol=1e-12) for point in grid)


def _fit_value(row: dict, value: object) -> object:
    """The value in the row's own type, or InvalidValue saying why the row cannot take it."""
    kind, type_ = scalar_kind(value), row["type"]
    if type_ in ("int", "float"):
        if kind not in ("int", "float") or (type_ == "int" and kind != "int"):
            raise InvalidValue(f"has the wrong type: {'an Int takes whole' if type_ == 'int' else 'a Float takes'} "
                           "numbers")
        value = value if type_ == "int" else float(value)
        if not math.isfinite(value) or not row["min"] <= value <= row["max"]:
            raise InvalidValue(f"is outside the range {_range_text(row)}")
        on_steps = value_possible(row, value) if type_ == "int" else _on_float_steps(row, value)
        if not on_steps:
            raise InvalidValue(f"is not one of the values the range {_range_text(row)} takes")
        return value
    if type_ == "boolean":
        if kind != "bool":
            raise InvalidValue("has the wrong type: a Boolean takes true or false")
        return value
    allowed = row["values"] if type_ == "choice" else [row["value"]]
    wanted = scalar_kind(allowed[0])
    if kind == "int" and wanted == "float":
        value, kind = float(value), "float"
    if kind != wanted:
        raise InvalidValue(f"has the wrong type: the space's values are {', '.join(format_value(v) for v in allowed)}")
    if value not in allowed:
        if type_ == "fixed":
            raise InvalidValue(f"differs from the space's fixed value {format_value(allowed[0])}")
        raise InvalidValue(f"is not one of the choices {', '.join(format_value(v) for v in allowed)}")
    return value


def fit_configuration(rows: list[dict], values: dict) -> FittedConfiguration:
    """A configuration brought into a validated space as KerasTuner's ensure_active_values would; ConfigurationError
    names every hyperparameter that does not fit."""
    by_name = {row["name"]: row for row in rows}
    given = {name: value for name, value in values.items() if not name.startswith("tuner/")}
    problems = [f"{name} is not a hyperparameter of the new search space." for name in given if name not in by_name]
    fitted = FittedConfiguration(values={})
    for row in parents_first(rows):
        name, parent = row["name"], row["parent"]
        if parent is not None and (parent not in fitted.values or fitted.values[parent] not in row["parent_values"]):
            if name in given:
                fitted.dropped.append(name)
            continue
        if name not in given:
            fitted.values[name] = row_default(row)
            fitted.defaults.append(name)
            continue
        try:
            fitted.values[name] = _fit_value(row, given[name])
        except InvalidValue as exc:
            problems.append(f"{name} = {format_value(given[name])} {exc}.")
    if problems:
        raise ConfigurationError(problems)
    return fitted


def fixed_type_errors(rows: list[dict], reference: list[dict], hypermodel: str) -> dict[int, list[str]]:
    """Fixed values whose type the hypermodel cannot take for that name (its default space says
    what it expects): caught here, not as every trial failing one by one."""
    expected = {row["name"]: row for row in reference}
    errors: dict[int, list[str]] = {}
    for index, row in enumerate(rows):
        want = expected.get(row["name"])
        if row["type"] != "fixed" or want is None:
            continue
        value, kind = row["value"], scalar_kind(row["value"])
        if want["type"] == "int" and kind != "int":
            message = "a whole number"
        elif want["type"] == "float" and kind not in ("int", "float"):
            message = "a number"
        elif want["type"] == "boolean" and kind != "bool":
            message = "true or false"
        elif want["type"] == "choice" and value not in want["values"]:
            message = "one of " + ", ".join(format_value(v) for v in want["values"])
        else:
            continue
        errors[index] = [f"The {hypermodel} hypermodel takes {row['name']} as {message}, not {format_value(value)}."]
    return errors
