"""What each quantized variant costs and saves against its float32 model (workers/export/quantization.py).

    python -m benchmarks.quantization

No services needed. Three bundled datasets with Tuneboard's own hypermodel for each at its space's default
values: `cnn` on digits_images, `dense` on digits and `sequence` on waves, each trained on its training split
(the product's split, seed 0) for EPOCHS epochs. Per model and variant, ROUNDS rounds (a fresh training seed
each): the variant's accuracy on the test split minus the float model's (accuracy_drop, positive = worse),
file size over the float model's file in its own format (.keras for Keras int8, the float32 .tflite for the
TFLite variants), and per-row CPU latency at batch 1 and 64 over the float model's (Keras predict_on_batch
for the .keras variant, the TFLite runtime for the TFLite ones, each against the float model in the same
runtime). Full-integer TFLite twice: per-channel weight scales (tflite_int8_full, the default) and one scale
per tensor (tflite_int8_tensor, tflite_full_integer_per_tensor here). The medians of the rounds go to
benchmarks/results/quantization.json; each round's figures too.
Targets (issue 42): full-integer TFLite size_ratio <= 0.3 and accuracy_drop <= 0.01 on digits_images; `targets.met`
says for each full-integer flavour whether its medians meet both.
"""

import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import RESULTS

EPOCHS, ROUNDS = 15, 3
CASES = [("digits_images", "cnn"), ("digits", "dense"), ("waves", "sequence")]


def _data(name: str):
    from experiments.datasets.bundled import load_bundled
    from experiments.datasets.splits import split_indices

    parsed = load_bundled(name)
    train, val, test = split_indices(parsed, val_fraction=0.15, test_fraction=0.15, seed=0)
    return parsed, train, val, test


def _build(hypermodel: str, parsed, x_train):
    import keras_tuner as kt

    from workers.hypermodels import build
    from workers.hypermodels.base import DataInfo

    info = DataInfo.from_training_split(x_train, "classification", len(parsed.classes), kind=_kind_of(hypermodel))
    return build(hypermodel, kt.HyperParameters(), info)


def _kind_of(hypermodel: str) -> str:
    return {"cnn": "image", "dense": "tabular", "sequence": "sequence"}[hypermodel]


def _accuracy(probabilities, y) -> float:
    import numpy as np

    return float(np.mean(np.argmax(probabilities, axis=1) == y))


def _round(dataset: str, hypermodel: str, seed: int) -> dict:
    import keras

    from workers.export import quantization as q
    from workers.export.saved_model import export_saved_model
    from workers.export.tflite import _convert

    parsed, train, val, test = _data(dataset)
    x, y = parsed.x, parsed.y
    keras.utils.set_random_seed(seed)
    model = _build(hypermodel, parsed, x[train])
    model.fit(x[train], y[train], validation_data=(x[val], y[val]), epochs=EPOCHS, batch_size=32, verbose=0)
    float_accuracy = _accuracy(model.predict(x[test], verbose=0), y[test])
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        model.save(work / "float.keras")
        int8 = q.keras_quantized(model, "int8")
        int8.save(work / "int8.keras")
        saved = export_saved_model(model, work / "saved")
        try:
            float_tflite = _convert(saved, quantise=False)
        except Exception:  # LSTM: TFLite converts it with a static batch of one (workers/export/tflite.py)
            saved = export_saved_model(model, work / "saved-one", batch_size=1)
            float_tflite = _convert(saved, quantise=False)
        variants = {"tflite_dynamic_range": _convert(saved, quantise=True)}
        unavailable = q.full_integer_unavailable(model)
        if unavailable is None:
            variants["tflite_full_integer"] = q.full_integer_tflite(model, x[train], work, seed=seed)
            variants[PER_TENSOR] = q.full_integer_tflite(model, x[train], work, per_tensor=True, seed=seed)
        float_runner = q.TfliteRunner(float_tflite)
        base = {batch: q.latency_ms_per_row(float_runner, x[test], batch=batch) for batch in (1, 64)}
        keras_base = {batch: q.latency_ms_per_row(model.predict_on_batch, x[test], batch=batch) for batch in (1, 64)}
        out = {"float_accuracy": float_accuracy, "runtime": float_runner.name, "keras_int8": {
            "size_ratio": (work / "int8.keras").stat().st_size / (work / "float.keras").stat().st_size,
            "accuracy_drop": float_accuracy - _accuracy(int8.predict(x[test], verbose=0), y[test]),
            **{f"latency_ratio_batch{b}": q.latency_ms_per_row(int8.predict_on_batch, x[test], batch=b) / keras_base[b]
               for b in (1, 64)}}}
        for name, flatbuffer in variants.items():
            runner = q.TfliteRunner(flatbuffer)
            out[name] = {"size_ratio": len(flatbuffer) / len(float_tflite), "bytes": len(flatbuffer),
                         "float_bytes": len(float_tflite),
                         "accuracy_drop": float_accuracy - _accuracy(runner(x[test]), y[test]),
                         **{f"latency_ratio_batch{b}": q.latency_ms_per_row(runner, x[test], batch=b) / base[b]
                            for b in (1, 64)}}
            if name in FULL_INTEGER:
                out[name]["float_ops"] = q.float_tensors_in_ops(flatbuffer)
        if unavailable is not None:
            out.update({name: {"unavailable": unavailable} for name in FULL_INTEGER})
    return out


PER_TENSOR = "tflite_full_integer_per_tensor"  # the tflite_int8_tensor variant: one scale per weight tensor
FULL_INTEGER = ("tflite_full_integer", PER_TENSOR)
VARIANTS = ("keras_int8", "tflite_dynamic_range", *FULL_INTEGER)
FIGURES = ("size_ratio", "latency_ratio_batch1", "latency_ratio_batch64", "accuracy_drop")


def _settings() -> None:
    """The hypermodel catalog reads Django's settings (a team's own hypermodels); no database is touched."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
    import django

    django.setup()


def measure() -> dict:
    _settings()
    results, started = {}, time.perf_counter()
    for dataset, hypermodel in CASES:
        rounds = [_round(dataset, hypermodel, seed) for seed in range(ROUNDS)]
        key = f"{dataset}/{hypermodel}"
        results[key] = {variant: ({figure: round(statistics.median(r[variant][figure] for r in rounds), 4)
                                   for figure in FIGURES} if "unavailable" not in rounds[0][variant]
                                  else rounds[0][variant]) for variant in VARIANTS}
        results[key]["float_accuracy"] = round(statistics.median(r["float_accuracy"] for r in rounds), 4)
        results[key]["rounds"] = rounds
        print(key, json.dumps({v: results[key][v] for v in VARIANTS}), file=sys.stderr, flush=True)
    cnn = results["digits_images/cnn"]
    met = {name: cnn[name]["size_ratio"] <= 0.3 and cnn[name]["accuracy_drop"] <= 0.01 for name in FULL_INTEGER}
    return {"models": results, "runtime": results["digits_images/cnn"]["rounds"][0]["runtime"],
            "epochs": EPOCHS, "rounds": ROUNDS, "seconds": round(time.perf_counter() - started, 1),
            "targets": {"full_integer_size_ratio_max": 0.3, "full_integer_accuracy_drop_max": 0.01,
                        "met": met}}


def main() -> None:
    result = measure()
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "quantization.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "models"}))


if __name__ == "__main__":
    main()
