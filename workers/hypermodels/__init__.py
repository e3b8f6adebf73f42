"""The registry of model families: built-in ones and those a team installs on its workers.

A hypermodel is `build_model(hp)` or `build_model(hp, data)` returning a compiled Keras
model; `data` (a DataInfo) tells shapes, task and feature statistics, so one function
serves every dataset. Team functions are named in TUNEBOARD_HYPERMODELS.
"""

import importlib
import inspect
from collections.abc import Callable

from experiments.hypermodel_catalog import hypermodel_entries
from workers.hypermodels.base import DataInfo
from workers.hypermodels.dense import build_dense


class UnknownHypermodel(LookupError):
    pass


BUILTIN_FUNCTIONS: dict[str, Callable] = {"dense": build_dense}


def resolve(name: str) -> Callable:
    if name in BUILTIN_FUNCTIONS:
        return BUILTIN_FUNCTIONS[name]
    entry = hypermodel_entries().get(name)
    if entry is None or not entry.target:
        raise UnknownHypermodel(f"No hypermodel named {name!r} is registered on this worker.")
    module_name, _, attr = entry.target.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise UnknownHypermodel(f"Hypermodel {name!r} ({entry.target}) cannot be loaded here: {exc}") from exc


def build(name: str, hp, data: DataInfo):
    function = resolve(name)
    wants_data = len(inspect.signature(function).parameters) >= 2
    return function(hp, data) if wants_data else function(hp)
