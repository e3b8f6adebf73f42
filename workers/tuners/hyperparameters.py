"""Search-space rows (experiments/tuning/search_space.py) <-> keras_tuner.HyperParameters, registered the way
KerasTuner 1.4.8 reads them back (docs/design/distributed-search.md, "Search spaces")."""

import contextlib
from collections.abc import Iterator

import keras_tuner
from keras_tuner.engine import hyperparameters as hp_types

from experiments.tuning.search_space import parents_first, validate_search_space


def _declare(hp: keras_tuner.HyperParameters, row: dict) -> None:
    name, type_ = row["name"], row["type"]
    if type_ == "int":
        hp.Int(name, row["min"], row["max"], step=row["step"], sampling=row["sampling"])
    elif type_ == "float":
        hp.Float(name, row["min"], row["max"], step=row["step"], sampling=row["sampling"])
    elif type_ == "boolean":
        hp.Boolean(name)
    elif type_ == "fixed":
        hp.Fixed(name, row["value"])
    elif isinstance(row["values"][0], bool):
        if len(row["values"]) == 2:
            hp.Boolean(name, default=row["values"][0])
        else:
            hp.Fixed(name, row["values"][0])
    else:
        hp.Choice(name, row["values"], ordered=row["ordered"])


@contextlib.contextmanager
def _ancestor_scopes(
    hp: keras_tuner.HyperParameters, row: dict, by_name: dict[str, dict]
) -> Iterator[None]:
    chain = []  # the row, its parent, grandparent, ... : each contributes its own condition
    while row["parent"]:
        chain.append(row)
        row = by_name[row["parent"]]
    with contextlib.ExitStack() as stack:
        for link in reversed(chain):  # outermost ancestor first
            stack.enter_context(hp.conditional_scope(link["parent"], link["parent_values"]))
        yield


def to_hyperparameters(rows: list[dict]) -> keras_tuner.HyperParameters:
    """The search space as KerasTuner sees it; rows are validated (and normalised) again."""
    rows = validate_search_space(rows)
    by_name = {row["name"]: row for row in rows}
    hp = keras_tuner.HyperParameters()
    for row in parents_first(rows):
        with _ancestor_scopes(hp, row, by_name):
            _declare(hp, row)
    return hp


def active_values(hp: keras_tuner.HyperParameters) -> dict:
    """Values of the active hyperparameters only, as plain JSON-safe Python scalars."""
    found = {}
    for param in hp.space:
        if param.name not in hp.values or not hp.is_active(param):
            continue
        value = hp.values[param.name]
        if hasattr(value, "item"):  # numpy scalars are not JSON-serialisable
            value = value.item()
        if isinstance(param, hp_types.Int) and not isinstance(value, bool):
            value = int(value)
        elif isinstance(param, hp_types.Float):
            value = float(value)
        found[param.name] = value
    return found


def typed_values(hp: keras_tuner.HyperParameters) -> dict:
    """All of hp.values (tuner/* bookkeeping included), each registered hyperparameter's value
    in its own type: int for Int, float for Float, plain Python scalars, never numpy's."""
    declared = {param.name: param for param in hp.space}
    typed = {}
    for name, value in hp.values.items():
        if hasattr(value, "item"):
            value = value.item()
        param = declared.get(name)
        if isinstance(param, hp_types.Int) and not isinstance(value, bool) and value is not None:
            value = int(round(value))
        elif isinstance(param, hp_types.Float) and value is not None:
            value = float(value)
        typed[name] = value
    return typed
