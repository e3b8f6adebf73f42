"""A study's compute settings as the web sees them (choices, defaults, rules), without TensorFlow;
workers/host/compute.py makes the same values real."""

from dataclasses import asdict, dataclass

QUEUES = ("cpu", "gpu", "tpu")
# The Keras backend a study trains with. A worker process runs one (KERAS_BACKEND, set before
# Keras loads) and consumes the queues of that backend: TensorFlow's are the accelerator names,
# JAX's the same names with JAX_SUFFIX ("gpu-jax"), so routing is by queue name alone.
BACKENDS = {
    "tensorflow": "TensorFlow (default: every hypermodel, MirroredStrategy/TPUStrategy, all export formats "
                  "made where it trains)",
    "jax": "JAX (often the fastest on GPUs and TPUs; DataParallel over the host's devices; SavedModel and "
           "TFLite are made afterwards on a TensorFlow worker of the cpu queue)",
}
BACKEND_NAMES = {"tensorflow": "TensorFlow", "jax": "JAX"}
DEFAULT_BACKEND = "tensorflow"
JAX_SUFFIX = "-jax"


def task_queue(queue: str, backend: str) -> str:
    """The Celery queue a study's jobs are sent to: its accelerator queue, on its backend's workers."""
    return queue if backend == DEFAULT_BACKEND else f"{queue}{JAX_SUFFIX}"


def backend_queues(backend: str, queues=QUEUES) -> list[str]:
    """The queues a worker of `backend` may consume (the accelerator queues in that backend's naming)."""
    return [task_queue(queue, backend) for queue in queues]


TASK_QUEUES = (*QUEUES, *backend_queues("jax"))


def queue_backend(name: str) -> str:
    """The backend whose workers serve the Celery queue `name`."""
    return "jax" if name.endswith(JAX_SUFFIX) else DEFAULT_BACKEND
PRECISIONS = {
    "float32": "float32 (exact, every device)",
    "mixed_float16": "mixed float16 (GPUs with tensor cores; loss scaling as Keras does it)",
    "mixed_bfloat16": "mixed bfloat16 (TPUs, recent CPUs and GPUs)",
}
JIT_COMPILE = {"auto": "auto (Keras decides)", "on": "on (XLA)", "off": "off"}
MAX_STEPS_PER_EXECUTION = 1000
MAX_DEVICES_PER_TRIAL = 64


@dataclass(frozen=True)
class ComputeSettings:
    """How one trial (or retrain, or ensemble member) runs. The study's batch size is per
    replica: with N devices a step sees N × batch size rows."""

    queue: str = "cpu"
    backend: str = DEFAULT_BACKEND
    precision: str = "float32"
    jit_compile: str = "auto"
    steps_per_execution: int = 1
    devices_per_trial: int = 1

    @classmethod
    def from_study(cls, study) -> "ComputeSettings":
        return cls(queue=study.queue, backend=study.backend, precision=study.precision, jit_compile=study.jit_compile,
                   steps_per_execution=study.steps_per_execution, devices_per_trial=study.devices_per_trial)

    def as_dict(self) -> dict:
        return asdict(self)


def compute_errors(*, queue: str, backend: str = DEFAULT_BACKEND, precision: str, jit_compile: str, steps_per_execution,
                   devices_per_trial) -> dict[str, str]:
    """{field: message} for every rule the settings break; empty when they all hold."""
    errors = {}
    if queue not in QUEUES:
        errors["queue"] = f"Choose one of: {', '.join(QUEUES)}."
    if backend not in BACKENDS:
        errors["backend"] = f"Choose one of: {', '.join(BACKENDS)}."
    if precision not in PRECISIONS:
        errors["precision"] = f"Choose one of: {', '.join(PRECISIONS)}."
    elif precision == "mixed_float16" and queue in ("cpu", "tpu"):
        errors["precision"] = (f"mixed float16 needs a GPU: on the {queue.upper()} queue it is slower than float32 "
                               "(CPUs emulate float16; TPUs use bfloat16). Choose mixed bfloat16 or float32.")
    if jit_compile not in JIT_COMPILE:
        errors["jit_compile"] = f"Choose one of: {', '.join(JIT_COMPILE)}."
    for name, value, high in (("steps_per_execution", steps_per_execution, MAX_STEPS_PER_EXECUTION),
                              ("devices_per_trial", devices_per_trial, MAX_DEVICES_PER_TRIAL)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
            errors[name] = f"Must be a whole number from 1 to {high:,}."
    return errors
