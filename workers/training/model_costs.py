"""What a trained model costs to serve (its parameters and, when asked, its one-row latency on this worker),
reported beside its metrics so a study can optimise or bound it."""

import statistics
import time

import numpy as np

LATENCY_WARMUP = 3
LATENCY_REPEATS = 15


def model_costs(model, x_sample: np.ndarray, *, latency: bool, replicas: int = 1) -> dict:
    costs = {"params": float(model.count_params())}
    if latency:
        costs["latency_ms"] = latency_ms(model, x_sample, rows=max(1, replicas))
    return costs


def time_costs(seconds: float, *, devices: int, epochs: int) -> dict:
    """What the trial cost in time, for cost objectives and constraints: its wall time (every attempt of a preempted
    trial) times the devices it held (the device-seconds the fleet's quotas count), and per epoch trained."""
    return {"device_seconds": round(seconds * devices, 4), "seconds_per_epoch": round(seconds / max(epochs, 1), 4)}


def latency_ms(model, x_sample: np.ndarray, *, rows: int = 1) -> float:
    """Median milliseconds of predict_on_batch on `rows` rows (one per device under data
    parallelism, which splits every batch evenly), after a few calls that compile and warm up."""
    batch = np.repeat(np.asarray(x_sample[:1]), rows, axis=0) if len(x_sample) < rows else np.asarray(x_sample[:rows])
    for _ in range(LATENCY_WARMUP):
        model.predict_on_batch(batch)
    times = []
    for _ in range(LATENCY_REPEATS):
        started = time.perf_counter()
        model.predict_on_batch(batch)
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 4)
