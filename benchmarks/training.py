"""What Tuneboard's training loop costs against plain Keras, and what the compute settings buy.

    python -m benchmarks.training

No services needed. Every figure comes from a fresh process training the same small CNN
(Tuneboard's `cnn` hypermodel with CNN_VALUES: Rescaling, two conv blocks, a dense head)
on 8,192 random 32x32x3 uint8 images (10 classes, 1,024 validation rows, batch 64 per
replica): WARMUP_EPOCHS epochs to trace and warm up, then the median of TIMED_EPOCHS epoch
times (each epoch includes its validation pass). Prints one JSON object as its last line and
writes benchmarks/results/training.json:
- tuneboard_vs_plain_ratio: samples/s inside workers.training.fitting.run_trial (its callbacks, the
  tf.data pipeline, a reporter that writes each epoch as a JSON line and fsyncs it, as the
  worker writes each epoch to the database) over samples/s of a plain model.fit on the NumPy
  arrays, from the median epoch of ROUNDS alternating runs of each, pooled (target >= 0.9).
  On a shared, busy host the wall clock swings with other processes, so also: the same ratio
  from the fastest epoch of each (the least disturbed), from CPU time (which such contention
  hardly moves), and round by round (the spread);
- cpu: samples/s (and per CPU second) in run_trial for float32 vs mixed_bfloat16, and
  steps_per_execution 1 vs 16 (the float32 / 1 figures are the medians of the rounds above);
- gpu: float32 vs mixed_float16 on one GPU, when this host has one (else null, with a note).
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import RESULTS, ROOT

TRAIN_ROWS, VAL_ROWS, CLASSES, BATCH = 8192, 1024, 10, 64
WARMUP_EPOCHS, TIMED_EPOCHS, ROUNDS, SETTING_ROUNDS = 2, 6, 5, 2


def _data():
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(TRAIN_ROWS + VAL_ROWS, 32, 32, 3), dtype=np.uint8)
    y = rng.integers(0, CLASSES, size=TRAIN_ROWS + VAL_ROWS).astype("int64")
    return x[:TRAIN_ROWS], y[:TRAIN_ROWS], x[TRAIN_ROWS:], y[TRAIN_ROWS:]


# Tuneboard's own `cnn` hypermodel with these values, in both arms: the same model.
CNN_VALUES = {"blocks": 2, "filters": 16, "kernel_size": 3, "batch_norm": False, "pooling": "max", "dropout": 0.0,
              "head": "flatten", "dense_units": 64, "flip": False, "rotation": 0.0, "zoom": 0.0,
              "optimizer": "adam", "learning_rate": 1e-3}


def _build_cnn():
    import keras_tuner as kt
    import numpy as np

    from workers.hypermodels.base import DataInfo
    from workers.hypermodels.cnn import build_cnn

    hp = kt.HyperParameters()
    for name, value in CNN_VALUES.items():
        hp.Fixed(name, value)
    info = DataInfo(input_shape=(32, 32, 3), task="classification", n_classes=CLASSES,
                    feature_mean=np.zeros(3, "float32"), feature_variance=np.ones(3, "float32"), kind="image")
    return build_cnn(hp, info)


def _stamp() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _timed_epochs(stamps: list[tuple[float, float]], clock: int) -> list[float]:
    """Seconds of each epoch after the warm-up, on the wall clock (0) or in process CPU time (1)."""
    return [b[clock] - a[clock] for a, b in zip(stamps[:-1], stamps[1:], strict=True)][WARMUP_EPOCHS:]


def _plain_fit(options: dict) -> list[float]:
    import keras

    x, y, x_val, y_val = _data()
    stamps = [_stamp()]

    class Stamp(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            stamps.append(_stamp())

    keras.utils.set_random_seed(0)
    model = _build_cnn()
    model.fit(x, y, batch_size=BATCH, epochs=WARMUP_EPOCHS + TIMED_EPOCHS, validation_data=(x_val, y_val),
              callbacks=[Stamp()], verbose=0)
    return stamps


class _FileReporter:
    """Per-epoch work like the worker's: the epoch's metrics written durably, then "go on"."""

    def __init__(self, path: Path):
        self.file = open(path, "a")
        self.stamps = [_stamp()]

    def epoch_end(self, execution: int, epoch: int, logs: dict) -> bool:
        self.file.write(json.dumps({"execution": execution, "epoch": epoch, **logs}) + "\n")
        self.file.flush()
        os.fsync(self.file.fileno())
        self.stamps.append(_stamp())
        return True


def _tuneboard(options: dict) -> list[float]:
    from experiments.tuning.compute_options import ComputeSettings
    from workers.training.fitting import DatasetArrays, TrialSpec, run_trial

    x, y, x_val, y_val = _data()
    data = DatasetArrays(x, y, x_val, y_val, x_val, y_val)
    spec = TrialSpec(objective="val_loss", direction="min", epochs=WARMUP_EPOCHS + TIMED_EPOCHS, batch_size=BATCH,
                     patience=1000, executions=1, seed=0)
    compute = ComputeSettings(queue=options.get("queue", "cpu"), precision=options.get("precision", "float32"),
                              steps_per_execution=options.get("steps_per_execution", 1))
    with tempfile.TemporaryDirectory() as tmp:
        reporter = _FileReporter(Path(tmp) / "epochs.jsonl")
        run_trial(build=_build_cnn, spec=spec, data=data, reporter=reporter, workdir=Path(tmp), compute=compute)
    return reporter.stamps


def _one(options: dict) -> None:
    """In the fresh process: train once, print the timed epochs' wall and CPU seconds."""
    stamps = (_plain_fit if options["mode"] == "plain" else _tuneboard)(options)
    print(json.dumps({"epoch_seconds": [round(e, 4) for e in _timed_epochs(stamps, 0)],
                      "epoch_cpu_seconds": [round(e, 4) for e in _timed_epochs(stamps, 1)]}))


def _rate(epochs: list[float], pick=statistics.median) -> float:
    return round(TRAIN_ROWS / pick(epochs), 1)


def _measure(options: dict, *, gpu: bool = False) -> dict:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(ROOT)}
    if not gpu:
        env["CUDA_VISIBLE_DEVICES"] = "-1"  # CPU figures stay CPU figures on a GPU host
    done = subprocess.run([sys.executable, "-m", "benchmarks.training", "--one", json.dumps(options)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"{options} failed:\n{done.stderr[-3000:]}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{options}: {_rate(found['epoch_seconds'])} samples/s ({_rate(found['epoch_cpu_seconds'])} per CPU "
          f"second), epochs {found['epoch_seconds']} s", file=sys.stderr)
    return found


def _summary(runs: list[dict]) -> dict:
    """Samples per second over the timed epochs of all these runs pooled: the median epoch,
    the fastest epoch (the one least slowed by other processes) and the median CPU time."""
    wall = [e for run in runs for e in run["epoch_seconds"]]
    cpu = [e for run in runs for e in run["epoch_cpu_seconds"]]
    return {"samples_per_second": _rate(wall), "samples_per_second_best_epoch": _rate(wall, min),
            "samples_per_cpu_second": _rate(cpu)}


def measure_ratio() -> dict:
    plain, tuneboard = [], []
    for _ in range(ROUNDS):  # alternating, so drift in the machine's speed hits both alike
        plain.append(_measure({"mode": "plain"}))
        tuneboard.append(_measure({"mode": "tuneboard"}))
    ours, theirs = _summary(tuneboard), _summary(plain)
    return {"plain": theirs, "tuneboard": ours,
            "ratio": {unit: round(ours[unit] / theirs[unit], 3) for unit in ours},
            "by_round": [round(_rate(t["epoch_seconds"]) / _rate(p["epoch_seconds"]), 3)
                         for p, t in zip(plain, tuneboard, strict=True)]}


def measure_cpu_settings(float32: dict) -> dict:
    """Each setting against the float32, steps-per-execution-1 trials of measure_ratio."""
    def runs(options: dict) -> dict:
        return _summary([_measure({"mode": "tuneboard", **options}) for _ in range(SETTING_ROUNDS)])

    figures = {"float32": float32, "steps_per_execution_1": float32,
               "mixed_bfloat16": runs({"precision": "mixed_bfloat16"}),
               "steps_per_execution_16": runs({"steps_per_execution": 16})}
    return {f"{name}_{unit}": found[unit] for name, found in figures.items()
            for unit in ("samples_per_second", "samples_per_cpu_second")}


def measure_gpu_settings() -> dict | None:
    from workers.host.devices import discover_gpus

    if not discover_gpus():
        return None
    figures = {"float32": {}, "mixed_float16": {"precision": "mixed_float16"},
               "steps_per_execution_16": {"steps_per_execution": 16}}
    return {f"{name}_samples_per_second": _summary([_measure({"mode": "tuneboard", "queue": "gpu", **options},
                                                             gpu=True)])["samples_per_second"]
            for name, options in figures.items()}


def main() -> None:
    ratio = measure_ratio()
    cpu = measure_cpu_settings(ratio["tuneboard"])
    gpu = measure_gpu_settings()
    result = {
        "tuneboard_vs_plain_ratio": ratio["ratio"]["samples_per_second"],
        "tuneboard_vs_plain_ratio_best_epoch": ratio["ratio"]["samples_per_second_best_epoch"],
        "tuneboard_vs_plain_cpu_time_ratio": ratio["ratio"]["samples_per_cpu_second"],
        "tuneboard_vs_plain_ratio_by_round": ratio["by_round"],
        "plain_fit": ratio["plain"],
        "tuneboard": ratio["tuneboard"],
        "cpu": cpu,
        "gpu": gpu,
        "gpu_note": None if gpu else "no GPU on this host: GPU figures not measured",
        "setup": {"model": f"Tuneboard's cnn hypermodel with {CNN_VALUES}",
                  "train_rows": TRAIN_ROWS, "val_rows": VAL_ROWS, "image": "32x32x3 uint8",
                  "batch_size_per_replica": BATCH, "warmup_epochs": WARMUP_EPOCHS, "timed_epochs": TIMED_EPOCHS,
                  "rounds": ROUNDS, "setting_rounds": SETTING_ROUNDS, "cpu_count": os.cpu_count()},
        "targets": {"tuneboard_vs_plain_ratio": 0.9},
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "training.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        _one(json.loads(sys.argv[2]))
    else:
        main()
