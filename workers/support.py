"""What every worker job shares: the per-process dataset cache, and turning an exception into
the reason a person reads.
(Riding out database restarts is experiments.services.connections.with_db_retry.)"""

import logging
import os
import tempfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
from django.conf import settings

from experiments.errors import TuneboardError
from experiments.services.artifacts import artifact_copy_to_path
from workers.hypermodels.base import DataInfo
from workers.training import DatasetArrays

log = logging.getLogger(__name__)
_datasets: OrderedDict[int, tuple[DatasetArrays, DataInfo]] = OrderedDict()
_SPLITS = ("x_train", "y_train", "x_val", "y_val", "x_test", "y_test")


def _unpacked_splits(artifact) -> dict:
    """The dataset's splits as .npy files in a per-host cache, memory-mapped: decoded once per
    host (not per trial or per process), and pages of large image arrays are read only as
    training touches them. The cache is keyed by the artifact's hash, so it is never stale."""
    folder = Path(settings.VAR_DIR) / "dataset-cache" / artifact.sha256
    if not all((folder / f"{name}.npy").exists() for name in _SPLITS):
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder.parent) as tmp:
            path = artifact_copy_to_path(artifact=artifact, path=Path(tmp) / "splits.npz")
            with np.load(path, allow_pickle=False) as npz:
                for name in _SPLITS:
                    partial = Path(tmp) / f"{name}.npy"
                    np.save(partial, npz[name], allow_pickle=False)
                    os.replace(partial, folder / f"{name}.npy")  # atomic: a reader never sees half a file
    return {name: np.load(folder / f"{name}.npy", mmap_mode="r", allow_pickle=False) for name in _SPLITS}


def load_dataset(dataset) -> tuple[DatasetArrays, DataInfo]:
    """Dataset splits and their statistics, cached per process: consecutive trials of a
    study reuse them."""
    artifact = dataset.arrays
    if artifact.id in _datasets:
        _datasets.move_to_end(artifact.id)
        return _datasets[artifact.id]
    arrays = DatasetArrays(**_unpacked_splits(artifact))
    info = DataInfo.from_training_split(arrays.x_train, dataset.task, dataset.n_classes, kind=dataset.kind)
    _datasets[artifact.id] = arrays, info
    while len(_datasets) > 2:
        _datasets.popitem(last=False)
    return _datasets[artifact.id]


def failure_reason(exc: BaseException, *, job: str) -> str:
    """What a failed trial or model shows: our own errors' messages as they are, memory
    exhaustion with advice, anything else (a bug, a library's error) by type and message,
    logged with its traceback."""
    if isinstance(exc, TuneboardError):
        return str(exc)
    if isinstance(exc, MemoryError):
        return "It ran out of memory; try fewer units or a smaller batch size."
    log.error("%s crashed", job, exc_info=exc)
    return f"{type(exc).__name__}: {exc}"
