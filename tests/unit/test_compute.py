"""A study's compute settings in the worker: precision while the model is built and trained,
XLA and steps per execution on the compiled model, the tf.data pipeline, and where a trial's
replicas run (or why they cannot)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

from experiments.tuning.compute_options import ComputeSettings
from workers.host.backends import tf_runtime
from workers.host.backends.tf_runtime import batches as pipeline
from workers.host.compute import apply_compile_options, placement_for, precision
from workers.training.fitting import DatasetArrays, TrialSpec, describe, run_trial
from workers.training.inference import evaluate
from workers.trial_stops import TrialFailed

ROOT = Path(__file__).resolve().parents[2]


class Reporter:
    def epoch_end(self, execution, epoch, logs):
        return True


def build(units=8):
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(units, activation="relu")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(1, dtype="float32")(hidden))
    model.compile(optimizer="adam", loss="mse")
    return model


def data(rows=64):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(rows, 4)).astype("float32")
    y = x.sum(axis=1, keepdims=True)
    return DatasetArrays(x, y, x, y, x, y)


def spec(**overrides):
    return TrialSpec(**{"objective": "val_loss", "direction": "min", "epochs": 2, "batch_size": 8, "patience": 5,
                        "executions": 1, "seed": 1, **overrides})


def settings(**overrides):
    return ComputeSettings(**{"queue": "cpu", **overrides})


def orders(dataset) -> list[list[int]]:
    return [[int(v) for batch_x, _ in dataset for v in batch_x.numpy()[:, 0]] for _ in range(2)]


def test_the_precision_context_restores_float32_even_when_building_fails():
    with pytest.raises(ValueError):
        with precision(settings(precision="mixed_bfloat16")):
            assert keras.config.dtype_policy().name == "mixed_bfloat16"
            raise ValueError("the hypermodel broke")
    assert keras.config.dtype_policy().name == "float32"


def test_mixed_float16_models_get_keras_loss_scaling_when_they_compile():
    with precision(settings(queue="gpu", precision="mixed_float16")):
        model = build()
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert model.layers[1].compute_dtype == "float16" and model.layers[1].variable_dtype == "float32"
    assert keras.config.dtype_policy().name == "float32"


def test_a_mixed_bfloat16_trial_computes_in_bfloat16_and_its_result_is_finite(tmp_path):
    built = []

    def build_and_keep():
        built.append(build())
        return built[-1]

    result = run_trial(build=build_and_keep, spec=spec(), data=data(), reporter=Reporter(), workdir=tmp_path,
                       compute=settings(precision="mixed_bfloat16"))
    assert built[0].layers[1].compute_dtype == "bfloat16"
    assert np.isfinite(result.score) and result.checkpoint_path.exists()
    assert result.compute["precision"] == "mixed_bfloat16" and result.compute["replicas"] == 1
    assert keras.config.dtype_policy().name == "float32"


def test_steps_per_execution_runs_that_many_batches_per_call(tmp_path):
    calls, seen = [], []

    class CountCalls(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            calls.append(batch)

    def fit(model, callbacks, **kwargs):
        seen.append(model.steps_per_execution)
        return model.fit(callbacks=[*callbacks, CountCalls()], **kwargs)

    run_trial(build=build, spec=spec(epochs=1), data=data(64), reporter=Reporter(), workdir=tmp_path, fit=fit,
              compute=settings(steps_per_execution=4))
    assert seen == [4]
    assert len(calls) == 2  # 64 rows in batches of 8: 8 steps, 4 per call


class HostCopy(keras.layers.Layer):
    """Runs NumPy on the host: fine in a tf.function, impossible to compile with XLA."""

    def call(self, x):
        y = tf.numpy_function(lambda a: a, [x], tf.float32)
        y.set_shape(x.shape)
        return y


def build_host_copy():
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(1)(HostCopy()(inputs)))
    model.compile(loss="mse")
    return model


def test_jit_compile_on_makes_keras_compile_with_xla(tmp_path):
    model = build()
    apply_compile_options(model, settings(jit_compile="on"))
    assert model.jit_compile is True
    with pytest.raises(TrialFailed, match="XLA"):
        run_trial(build=build_host_copy, spec=spec(epochs=1), data=data(), reporter=Reporter(), workdir=tmp_path,
                  compute=settings(jit_compile="on"))
    result = run_trial(build=build_host_copy, spec=spec(epochs=1), data=data(), reporter=Reporter(),
                       workdir=tmp_path, compute=settings(jit_compile="off"))
    assert np.isfinite(result.score)


def test_jit_compile_auto_keeps_what_keras_chose_at_compile_time():
    model = build()
    chosen = model.jit_compile  # off on a CPU-only host
    apply_compile_options(model, settings(jit_compile="auto"))
    assert model.jit_compile == chosen is False


def test_the_training_pipeline_shuffles_reproducibly_and_differently_each_epoch():
    x = np.arange(40, dtype="float32").reshape(40, 1)

    def shuffled(seed):
        tf.random.set_seed(0)
        return orders(pipeline(x, x, batch_size=8, shuffle=True, seed=seed, drop_remainder=False))

    first, second = shuffled(3)
    assert sorted(first) == list(range(40)) and first != list(range(40))
    assert second != first  # a new order each epoch
    assert shuffled(3) == [first, second]  # the same sequence of orders with the same seed
    assert shuffled(4)[0] != first


def test_the_validation_pipeline_keeps_the_order_and_every_row():
    x = np.arange(21, dtype="float32").reshape(21, 1)
    first, second = orders(pipeline(x, x, batch_size=8, shuffle=False, seed=1, drop_remainder=False))
    assert first == second == list(range(21))


def test_drop_remainder_gives_batches_of_one_static_shape():
    images = np.zeros((21, 8, 8, 1), "uint8")
    dataset = pipeline(images, np.zeros(21, "int64"), batch_size=8, shuffle=True, seed=1, drop_remainder=True)
    assert dataset.element_spec[0].shape.as_list() == [8, 8, 8, 1]
    assert dataset.element_spec[0].dtype == tf.uint8
    assert [int(batch.shape[0]) for batch, _ in dataset] == [8, 8]


def text_data():
    x = np.array(["good film", "bad film", "great fun", "awful plot"] * 8)
    y = np.array([1, 0, 1, 0] * 8, "float32")
    return x, y


def build_text(x):
    vectorize = keras.layers.TextVectorization(max_tokens=20, output_mode="multi_hot")
    vectorize.adapt(x)
    inputs = keras.Input((), dtype="string")
    model = keras.Model(inputs, keras.layers.Dense(1, activation="sigmoid")(vectorize(inputs)))
    model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
    return model


def test_text_trains_and_evaluates_from_numpy_string_arrays(tmp_path):
    x, y = text_data()
    batches = list(pipeline(x, y, batch_size=8, shuffle=True, seed=1, drop_remainder=False))
    assert batches[0][0].dtype == tf.string and len(batches) == 4
    model = build_text(x)
    result = run_trial(build=lambda: model, spec=spec(objective="val_accuracy", direction="max"),
                       data=DatasetArrays(x, y, x, y, x, y), reporter=Reporter(), workdir=tmp_path)
    assert 0.0 <= result.score <= 1.0
    metrics = evaluate(model, x, y, batch_size=8)
    assert set(metrics) == {"loss", "accuracy"} and np.isfinite(metrics["loss"])


def test_a_hypermodels_own_fit_gets_numeric_arrays_with_the_global_batch_and_text_a_dataset(tmp_path):
    received = {}

    def own_fit(model, **kwargs):
        received.update(kwargs)
        return model.fit(**kwargs)

    rows = data(20)
    run_trial(build=build, spec=spec(epochs=1), data=rows, reporter=Reporter(), workdir=tmp_path, fit=own_fit)
    # Keras's own array input path on one device: no pipeline is built before fit.
    assert received["x"] is rows.x_train or np.array_equal(received["x"], rows.x_train)
    assert received["x"].dtype == np.float32 and received["batch_size"] == 8 and received["shuffle"] is True
    x_val, y_val = received["validation_data"]
    assert len(x_val) == len(y_val) == len(rows.x_val)

    received.clear()
    x, y = text_data()  # Keras's array path refuses strings: they get our batched pipeline
    model = build_text(x)
    run_trial(build=lambda: model, spec=spec(objective="val_accuracy", direction="max", epochs=1),
              data=DatasetArrays(x, y, x, y, x, y), reporter=Reporter(), workdir=tmp_path, fit=own_fit)
    assert isinstance(received["x"], tf.data.Dataset) and "y" not in received and "batch_size" not in received
    assert sum(int(b.shape[0]) for b, _ in received["validation_data"]) == len(x)


def test_the_compute_record_says_where_and_how_a_run_trains():
    record = describe(settings(steps_per_execution=16), batch_size=32)
    assert record == {"backend": "tensorflow", "device_kind": "cpu", "device_names": ["/device:CPU:0"], "replicas": 1,
                      "precision": "float32", "jit_compile": "auto", "steps_per_execution": 16,
                      "batch_size_per_replica": 32, "global_batch_size": 32,
                      "tensorflow": tf.__version__, "keras": keras.__version__}
    assert json.loads(json.dumps(record)) == record
    assert placement_for(settings(steps_per_execution=16)) is placement_for(settings())  # one strategy per child


def test_a_pipeline_without_targets_gives_batches_of_inputs_alone():
    x = np.arange(10, dtype="float64").reshape(10, 1)
    batches = list(pipeline(x, batch_size=4, shuffle=False, seed=0, drop_remainder=False))
    assert [b.dtype for b in batches] == [tf.float32] * 3  # as Keras treats NumPy float64
    assert np.concatenate(batches)[:, 0].tolist() == list(range(10))


def test_a_tpu_study_on_a_host_without_a_tpu_fails_with_the_routing_advice(tmp_path, monkeypatch):
    for name in tf_runtime.TPU_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(tf_runtime, "discover_tpus", lambda: [])
    with pytest.raises(TrialFailed, match="runs on the TPU queue, but this worker host has no TPU .*: route the tpu "
                                          "queue only to TPU hosts"):
        run_trial(build=build, spec=spec(), data=data(), reporter=Reporter(), workdir=tmp_path,
                  compute=settings(queue="tpu", precision="mixed_bfloat16"))


def test_a_gpu_study_on_a_host_without_a_gpu_fails_with_the_routing_advice():
    with pytest.raises(TrialFailed, match="runs on the GPU queue, but this worker child sees no GPU"):
        placement_for(settings(queue="gpu"))


def test_two_devices_per_trial_with_one_cpu_device_fails_saying_how_to_fix_it():
    with pytest.raises(TrialFailed) as failed:
        placement_for(settings(devices_per_trial=2))
    assert str(failed.value) == (
        "This trial needs 2 CPU devices (the study's devices per trial), but this worker child has 1: start the CPU "
        "workers with TUNEBOARD_CPU_DEVICES=2 (each child splits its CPU into that many logical devices), or set "
        "devices per trial to 1.")


def test_a_trial_with_two_devices_trains_two_replicas_of_a_mirrored_strategy():
    env = {**os.environ, "TUNEBOARD_CPU_DEVICES": "2", "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "unit" / "two_replica_trial.py")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["compute"]["replicas"] == 2 and found["compute"]["global_batch_size"] == 16
    assert found["compute"]["device_names"] == ["/device:CPU:0", "/device:CPU:1"]
    assert np.isfinite(found["score"])
