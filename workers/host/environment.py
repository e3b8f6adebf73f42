"""The environment record of a run in this worker child: what experiments/tuning/reproducibility.py
describes (dataset hash and split, seed, versions, host, devices, hypermodel code identity)."""

import functools
import hashlib
import inspect
import socket
import sys

from experiments.tuning.hypermodel_catalog import BUILTIN
from experiments.tuning.reproducibility import dataset_identity
from workers import hypermodels
from workers.host.versions import package_versions

# Installed packages do not change under a running process (an upgrade takes a restart to
# take effect), so they are looked up once, not once per trial.
_versions = functools.cache(package_versions)


@functools.cache
def _file_sha256(path: str) -> str | None:
    """Hashed once per process, the first time this child uses the module: as close as one can
    get to the code it imported (a file edited afterwards is not what runs here)."""
    try:
        with open(path, "rb") as file:
            return hashlib.file_digest(file, "sha256").hexdigest()
    except OSError:
        return None


def _version(module) -> str | None:
    """The module's __version__, else its top-level package's."""
    for candidate in (module, sys.modules.get(module.__name__.partition(".")[0])):
        version = getattr(candidate, "__version__", None)
        if version is not None:
            return str(version)
    return None


def hypermodel_identity(name: str) -> dict:
    """Which code builds the models: the module's version (if it declares one) and the sha256
    of its source file, for built-in families and team ones alike."""
    identity = {"name": name, "team": name not in BUILTIN}
    try:
        target = hypermodels.resolve(name)
    except hypermodels.UnknownHypermodel as exc:
        return {**identity, "error": str(exc)}
    code = target if inspect.isclass(target) or inspect.isfunction(target) else type(target)
    module = inspect.getmodule(code)
    path = inspect.getsourcefile(code) or getattr(module, "__file__", None)
    return {**identity, "target": f"{code.__module__}:{code.__qualname__}", "module": code.__module__,
            "version": _version(module) if module else None, "source_sha256": _file_sha256(path) if path else None}


def devices(compute: dict | None) -> dict | None:
    """The devices part of a compute record (workers/host/compute.py's Placement.record)."""
    if not compute:
        return None
    return {"kind": compute.get("device_kind"), "names": list(compute.get("device_names") or []),
            "replicas": compute.get("replicas")}


def environment_record(*, dataset, seed: int, hypermodel: str | None, compute: dict | None,
                       training: dict | None = None) -> dict:
    record = {
        "seed": seed,
        "host": socket.gethostname(),
        "devices": devices(compute),
        "versions": dict(_versions()),
        "dataset": dataset_identity(dataset),
    }
    if hypermodel:
        record["hypermodel"] = hypermodel_identity(hypermodel)
    if training is not None:
        record["training"] = training
    return record
