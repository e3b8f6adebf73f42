from dataclasses import dataclass

import numpy as np


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
            # Constant features would divide by zero; Normalization guards with epsilon too.
            feature_variance=np.maximum(flat.var(axis=0), 1e-12).astype("float32"),
        )
