"""A dataset's splits on a worker: unpacked once per host, memory-mapped, and the last two kept
per process (consecutive trials of a study reuse them)."""

import os
import tempfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
from django.conf import settings

from experiments.selectors.artifacts import artifact_copy_to_path
from workers.hypermodels.base import DataInfo
from workers.training.fitting import DatasetArrays

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
