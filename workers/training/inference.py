"""A trained model's metrics and outputs on rows, on the same input pipelines training uses."""

import numpy as np

from workers.host.compute import batches, for_inference, model_replicas
from workers.training.callbacks import clean_logs


def evaluate(model, x: np.ndarray, y: np.ndarray, batch_size: int) -> dict:
    """Metrics on one split, in the model's own strategy or device mesh (`batch_size` per
    replica); works for text (NumPy string arrays), which Keras's own NumPy input path rejects."""
    model = for_inference(model)
    dataset = batches(x, y, batch_size=batch_size * model_replicas(model), shuffle=False, seed=0,
                      drop_remainder=False)
    return clean_logs(model.evaluate(dataset, return_dict=True, verbose=0))


def predict(model, x: np.ndarray, batch_size: int, callbacks: list | None = None) -> np.ndarray:
    """Outputs for every row, in order; like `evaluate`, it takes text too. `callbacks` hear of
    each batch (a batch prediction job's progress and cancel)."""
    dataset = batches(x, None, batch_size=batch_size, shuffle=False, seed=0, drop_remainder=False)
    return for_inference(model).predict(dataset, verbose=0, callbacks=callbacks)
