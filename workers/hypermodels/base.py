from dataclasses import dataclass

import numpy as np


def unit_variance_if_constant(variance: np.ndarray) -> np.ndarray:
    """A feature constant on the training rows keeps unit scale (as scikit-learn's
    StandardScaler does). Dividing by a tiny variance instead would multiply any other value
    it takes later, in the test split or in production, by up to a million: the model's
    outputs explode on exactly the rows it has never seen."""
    return np.where(variance > 1e-12, variance, 1.0)


@dataclass(frozen=True)
class DataInfo:
    """What a hypermodel may know about the data: shapes, task, and training-split statistics
    so normalisation can be a layer of the model (exported models take raw features)."""

    input_shape: tuple[int, ...]
    task: str  # "classification" | "regression"
    n_classes: int
    feature_mean: np.ndarray
    feature_variance: np.ndarray

    @property
    def is_classification(self) -> bool:
        return self.task == "classification"

    @classmethod
    def from_training_split(cls, x_train: np.ndarray, task: str, n_classes: int) -> "DataInfo":
        flat = x_train.reshape(len(x_train), -1).astype("float64")
        return cls(
            input_shape=tuple(int(d) for d in x_train.shape[1:]),
            task=task,
            n_classes=n_classes,
            feature_mean=flat.mean(axis=0).astype("float32"),
            feature_variance=unit_variance_if_constant(flat.var(axis=0)).astype("float32"),
        )
