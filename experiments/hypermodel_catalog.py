"""The hypermodels a study can use, as the web sees them: names, descriptions, default spaces.

The web never imports the model code (it needs TensorFlow); the worker resolves the same
names in workers/hypermodels/. Team-provided hypermodels come from TUNEBOARD_HYPERMODELS,
"name=package.module:build_model", installed on the worker hosts.
"""

from dataclasses import dataclass, field

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


def _row(name: str, type_: str, **spec) -> dict:
    return {"name": name, "type": type_, "parent": None, "parent_values": [], **spec}


DENSE_DEFAULT_SPACE = [
    _row("num_layers", "int", min=1, max=3, step=1, sampling="linear"),
    _row("units", "int", min=32, max=256, step=32, sampling="linear"),
    _row("activation", "choice", values=["relu", "tanh", "gelu"], ordered=False),
    _row("dropout", "float", min=0.0, max=0.5, step=0.1, sampling="linear"),
    _row("batch_norm", "boolean"),
    _row("optimizer", "choice", values=["adam", "sgd", "rmsprop"], ordered=False),
    _row("learning_rate", "float", min=1e-4, max=1e-2, step=None, sampling="log"),
    {**_row("momentum", "float", min=0.0, max=0.9, step=0.1, sampling="linear"),
     "parent": "optimizer", "parent_values": ["sgd"]},
]


@dataclass(frozen=True)
class HypermodelEntry:
    name: str
    description: str
    default_space: list = field(default_factory=list)
    target: str = ""  # "package.module:function" for team-provided ones


BUILTIN = {
    "dense": HypermodelEntry(
        name="dense",
        description="MLP for vector data: layers, units, activation, dropout, batch norm, "
        "optimizer and learning rate; inputs are normalised inside the model.",
        default_space=DENSE_DEFAULT_SPACE,
    ),
}


def parse_hypermodel_setting(entries: list[str]) -> dict[str, HypermodelEntry]:
    found: dict[str, HypermodelEntry] = {}
    for entry in entries:
        name, _, target = entry.rpartition("=") if "=" in entry else ("", "", entry)
        module, _, attr = target.partition(":")
        if not module or not attr:
            raise ImproperlyConfigured(
                f"TUNEBOARD_HYPERMODELS entry {entry!r} must look like name=package.module:build_model."
            )
        name = name.strip() or attr
        if name in BUILTIN or name in found:
            raise ImproperlyConfigured(f"TUNEBOARD_HYPERMODELS names {name!r} twice (or a built-in).")
        found[name] = HypermodelEntry(name=name, description=f"Team hypermodel {target}", target=target)
    return found


def hypermodel_entries() -> dict[str, HypermodelEntry]:
    return {**BUILTIN, **parse_hypermodel_setting(settings.HYPERMODELS)}
