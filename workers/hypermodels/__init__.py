"""The registry of model families, built-in and team-installed: each a `build_model(hp[, data])` or a
keras_tuner.HyperModel (docs/design/datasets-and-models.md)."""

import importlib
import inspect
from collections.abc import Callable

from experiments.errors import TuneboardError
from experiments.tuning.hypermodel_catalog import hypermodel_entries, kind_mismatch
from workers.hypermodels.applications import build_resnet, build_xception
from workers.hypermodels.base import DataInfo
from workers.hypermodels.cnn import build_cnn
from workers.hypermodels.dense import build_dense
from workers.hypermodels.sequence import build_sequence
from workers.hypermodels.text import build_text


class UnknownHypermodel(TuneboardError, LookupError):
    pass


class WrongKindOfData(TuneboardError, ValueError):
    pass


BUILTIN_FUNCTIONS: dict[str, Callable] = {
    "dense": build_dense,
    "cnn": build_cnn,
    "text": build_text,
    "sequence": build_sequence,
    "resnet": build_resnet,
    "xception": build_xception,
}


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


def _as_hypermodel(target):
    import keras_tuner as kt

    if isinstance(target, type) and issubclass(target, kt.HyperModel):
        return target()
    return target if isinstance(target, kt.HyperModel) else None


def check_kind(name: str, data: DataInfo) -> None:
    """The web refuses such studies already; this guards studies made before a family
    declared its kinds, with the same words instead of a shape error deep in Keras."""
    entry = hypermodel_entries().get(name)
    reason = kind_mismatch(entry, data.kind) if entry is not None else None
    if reason:
        raise WrongKindOfData(f"The {name} hypermodel {reason}.")


def build(name: str, hp, data: DataInfo):
    check_kind(name, data)
    target = resolve(name)
    hypermodel = _as_hypermodel(target)
    if hypermodel is not None:
        return hypermodel.build(hp)
    wants_data = len(inspect.signature(target).parameters) >= 2
    return target(hp, data) if wants_data else target(hp)


def fit_function(name: str, hp):
    """How to train: a KerasTuner HyperModel's own `fit(hp, model, ...)`, or None for Keras's `model.fit`
    (a HyperModel that does not override fit included), which the fitting gives its step-free callback list."""
    import keras_tuner as kt

    hypermodel = _as_hypermodel(resolve(name))
    if hypermodel is None or type(hypermodel).fit is kt.HyperModel.fit:
        return None
    return lambda model, **kwargs: hypermodel.fit(hp, model, **kwargs)
