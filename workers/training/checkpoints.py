"""Trial checkpoints: the best epoch's weights as an uncompressed NPZ, a millisecond to write where a `.keras`
file costs tens (the architecture is rebuilt from the hyperparameters)."""

from pathlib import Path

import numpy as np

from experiments.errors import TuneboardError

SUFFIX = ".weights.npz"


class CheckpointMismatch(TuneboardError, ValueError):
    """The checkpoint's weights do not fit the rebuilt model."""


def save_weights(weights: list[np.ndarray], path: Path) -> Path:
    with open(path, "wb") as f:
        np.savez(f, *weights)
    return Path(path)


def load_weights(path: Path) -> list[np.ndarray]:
    with np.load(path, allow_pickle=False) as npz:
        return [npz[f"arr_{i}"] for i in range(len(npz.files))]


def restore(model, path: Path) -> None:
    """Put the checkpoint's weights into a model rebuilt from the same hyperparameters."""
    weights = load_weights(path)
    expected = [tuple(w.shape) for w in model.weights]
    found = [tuple(w.shape) for w in weights]
    if expected != found:
        raise CheckpointMismatch(
            f"The checkpoint holds {len(found)} weights shaped {found[:4]}…, but the rebuilt model has "
            f"{len(expected)} shaped {expected[:4]}…; was the hypermodel changed since the trial ran?"
        )
    model.set_weights(weights)
