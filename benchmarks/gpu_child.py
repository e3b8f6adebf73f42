"""The measuring side of benchmarks/gpu.py: one fresh process per measurement, on the backend
its KERAS_BACKEND names (set by the parent before this process starts, so Keras loads on it).

    python -m benchmarks.gpu_child '{"mode": "probe" | "plain" | "trial" | "limit", ...}'

Prints one JSON object as its last line. Everything backend-specific lives here, so the parent
never loads Keras, JAX or TensorFlow, and one run covers both backends. Nothing here imports
TensorFlow on JAX: "probe" imports only the backend it is asked about.
"""

import functools
import gc
import json
import os
import sys
import time
from pathlib import Path


def _configure(backend: str, packed: int = 1) -> None:
    """What a Tuneboard worker child does before Keras loads (workers/tasks.py): its threads
    (TUNEBOARD_TF_THREADS) and, on JAX, XLA's flags and GPU memory preallocation off (so
    several processes can share a GPU). The plain arm runs the same set-up, so the ratio
    compares training loops, not thread settings. `packed` trials share the device: each takes
    its share of its memory, as under a worker's TUNEBOARD_TRIALS_PER_GPU."""
    from workers.host.backends.child import configure_child

    configure_child(backend, packed=packed)


def probe(_spec: dict) -> dict:
    """The accelerators this backend sees: {"kind": "gpu"|"tpu"|"cpu", "name", "count"}."""
    backend = os.environ.get("KERAS_BACKEND", "tensorflow")
    if backend == "jax":
        import jax

        devices = jax.devices()
        kind = devices[0].platform if devices[0].platform in ("gpu", "tpu") else "cpu"
        # CUDA devices report platform "gpu" and device_kind "NVIDIA H100 80GB HBM3".
        return {"kind": kind, "name": devices[0].device_kind if kind != "cpu" else "cpu", "count": len(devices),
                "devices": [str(d) for d in devices]}
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        details = tf.config.experimental.get_device_details(gpus[0])
        return {"kind": "gpu", "name": details.get("device_name", "gpu"), "count": len(gpus),
                "devices": [d.name for d in gpus]}
    tpus = tf.config.list_logical_devices("TPU")
    if tpus:
        return {"kind": "tpu", "name": "tpu", "count": len(tpus), "devices": [d.name for d in tpus]}
    return {"kind": "cpu", "name": "cpu", "count": 1, "devices": ["CPU:0"]}


def _build(values: dict, x_train, n_classes: int):
    """Tuneboard's `cnn` hypermodel pinned to these values: the model a trial of the study builds."""
    import keras_tuner as kt

    from workers.hypermodels.base import DataInfo
    from workers.hypermodels.cnn import build_cnn

    hp = kt.HyperParameters()
    for name, value in values.items():
        hp.Fixed(name, value)
    return build_cnn(hp, DataInfo.from_training_split(x_train, "classification", n_classes, kind="image"))


def plain(spec: dict) -> dict:
    """A plain `model.fit` on in-memory NumPy arrays: no Tuneboard callbacks, input pipeline,
    database or heartbeat. Stamps the wall clock at each epoch's end, as the trial's epoch
    rows do."""
    _configure(spec["backend"])
    import keras
    import numpy as np

    folder = Path(spec["arrays"])
    x, y, x_val, y_val = (np.load(folder / f"{name}.npy") for name in ("x_train", "y_train", "x_val", "y_val"))
    ends: list[float] = []
    cpu_ends: list[float] = []

    class Stamp(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            ends.append(time.time())
            cpu_ends.append(time.process_time())

    started = time.time()
    keras.utils.set_random_seed(spec["seed"])
    model = _build(spec["values"], x, spec["classes"])
    model.fit(x, y, batch_size=spec["batch_size"], epochs=spec["epochs"], validation_data=(x_val, y_val),
              callbacks=[Stamp()], verbose=0)
    return {"epoch_ends": ends, "epoch_cpu_ends": cpu_ends, "started": started, "ended": time.time(),
            "backend": keras.backend.backend()}


def limit(spec: dict) -> dict:
    """The best this model does on this device (JAX only): the same model trained by one jitted step over rows kept
    on the device (Keras's stateless API under jax.jit, the optimizer's stateless update, the state donated), each
    epoch a fresh order from a device-side permutation, and a jitted validation pass, as fit's epoch has one. No
    callbacks, no logs read back, no host input at all. Stamps the clock once each epoch's work is done."""
    _configure(spec["backend"])
    import jax
    import keras
    import numpy as np

    folder = Path(spec["arrays"])
    x, y, x_val, y_val = (np.load(folder / f"{name}.npy") for name in ("x_train", "y_train", "x_val", "y_val"))
    keras.utils.set_random_seed(spec["seed"])
    model = _build(spec["values"], x, spec["classes"])
    optimizer = model.optimizer
    loss_fn = keras.losses.get(model.loss) if isinstance(model.loss, str) else model.loss
    optimizer.build(model.trainable_variables)
    x, y, x_val, y_val = (jax.device_put(a) for a in (x, y, x_val, y_val))
    batch, rows = spec["batch_size"], (len(x) // spec["batch_size"]) * spec["batch_size"]
    steps = rows // batch

    def loss_and_state(trainable, non_trainable, xb, yb):
        predicted, non_trainable = model.stateless_call(trainable, non_trainable, xb, training=True)
        return keras.ops.mean(loss_fn(yb, predicted)), non_trainable  # the loss over the batch, as fit's

    gradient = jax.value_and_grad(loss_and_state, has_aux=True)

    @jax.jit
    def permutation(key):
        return jax.random.permutation(key, len(x))

    @functools.partial(jax.jit, donate_argnums=0)
    def step(state, order, index):
        trainable, non_trainable, optimizer_state = state
        rows_of_step = jax.lax.dynamic_slice_in_dim(order, index * batch, batch)
        (loss, non_trainable), grads = gradient(trainable, non_trainable, x[rows_of_step], y[rows_of_step])
        trainable, optimizer_state = optimizer.stateless_apply(optimizer_state, grads, trainable)
        return (trainable, non_trainable, optimizer_state), loss

    @jax.jit
    def validate(trainable, non_trainable, xb, yb):
        predicted, _ = model.stateless_call(trainable, non_trainable, xb, training=False)
        return keras.ops.mean(loss_fn(yb, predicted))

    def validation_pass(trainable, non_trainable):  # in fit's batches: the whole split at once may not fit
        for start in range(0, len(x_val), batch):
            loss = validate(trainable, non_trainable, x_val[start:start + batch], y_val[start:start + batch])
        return loss

    state = ([v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables],
             [v.value for v in optimizer.variables])
    key = jax.random.PRNGKey(spec["seed"])
    ends: list[float] = []
    cpu_ends: list[float] = []
    started = time.time()
    for _ in range(spec["epochs"]):
        key, epoch_key = jax.random.split(key)
        order = permutation(epoch_key)
        for index in range(steps):  # one jitted step each, dispatched ahead of the device: nothing read back
            state, loss = step(state, order, jax.numpy.asarray(index))
        validation_pass(state[0], state[1]).block_until_ready()
        ends.append(time.time())
        cpu_ends.append(time.process_time())
    return {"epoch_ends": ends, "epoch_cpu_ends": cpu_ends, "started": started, "ended": time.time(),
            "backend": keras.backend.backend(), "last_loss": float(loss), "steps_per_epoch": steps}


def _wait_for_all(barrier: str, parties: int) -> None:
    """Packed trials start training together: each process says it is ready (its libraries and
    device loaded), then waits for the others."""
    folder = Path(barrier)
    (folder / f"ready-{os.getpid()}").touch()
    deadline = time.monotonic() + 900
    while len(list(folder.glob("ready-*"))) < parties:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(list(folder.glob('ready-*')))} of {parties} packed trials got ready")
        time.sleep(0.02)


def trial(spec: dict) -> dict:
    """A Tuneboard trial of the (started) study, run as a worker child runs its task: claim
    under the study's lock, train with the study's callbacks (each epoch written to the
    database with the pruner's check), heartbeat thread, checkpoint artifact, finish."""
    _configure(spec["backend"], packed=spec.get("parties") or 1)
    import django

    django.setup()
    import keras

    import workers.jobs.slots
    import workers.jobs.trials  # as the worker child does at start (workers/tasks.py): not paid by its first trial

    keras.ops.convert_to_tensor([0.0])  # the backend's devices initialised, as after a worker's first trial
    # The process's CPU time (all its threads) at each epoch's end, read after the epoch's database
    # report returns: on a shared CPU the wall clock swings with other processes, CPU time hardly.
    cpu_ends: list[float] = []
    report = workers.jobs.trials._DatabaseReporter.epoch_end

    def epoch_end(self, execution: int, epoch: int, logs: dict):
        verdict = report(self, execution, epoch, logs)
        cpu_ends.append(time.process_time())
        return verdict

    workers.jobs.trials._DatabaseReporter.epoch_end = epoch_end
    gc.collect()
    gc.freeze()
    if spec.get("barrier"):
        _wait_for_all(spec["barrier"], spec["parties"])
    started = time.time()
    status = workers.jobs.slots.run_wakeup(study_id=spec["study_id"], task_id=f"bench-{os.getpid()}",
                                           worker_name=f"bench@{os.uname().nodename}")
    return {"status": status, "started": started, "ended": time.time(), "epoch_cpu_ends": cpu_ends,
            "backend": keras.backend.backend()}


if __name__ == "__main__":
    request = json.loads(sys.argv[1])
    found = {"probe": probe, "plain": plain, "trial": trial, "limit": limit}[request["mode"]](request)
    print(json.dumps(found))
