"""Which Keras backend this worker runs and the queues it may serve, read from KERAS_BACKEND (not from Keras) so
the main Celery process never loads a backend."""

import os

from experiments.tuning.compute_options import BACKENDS, DEFAULT_BACKEND, backend_queues, queue_backend


class BackendMismatch(RuntimeError):
    pass


def worker_backend(environ=os.environ) -> str:
    backend = (environ.get("KERAS_BACKEND") or DEFAULT_BACKEND).strip()
    if backend not in BACKENDS:
        raise BackendMismatch(f"KERAS_BACKEND={backend!r}: Tuneboard workers run {' or '.join(BACKENDS)}.")
    return backend


def queue_errors(queues: list[str], backend: str) -> list[str]:
    """Why a worker of `backend` must not consume these queues (empty when it may): a JAX study's
    jobs must reach only JAX workers, and a TensorFlow study's only TensorFlow ones."""
    return [f"queue {queue!r} holds {queue_backend(queue)} jobs, but this worker runs {backend} "
            f"(KERAS_BACKEND); serve {', '.join(backend_queues(backend))} instead"
            for queue in queues if queue_backend(queue) != backend and queue in _accelerator_queues()]


def _accelerator_queues() -> set[str]:
    return {queue for backend in BACKENDS for queue in backend_queues(backend)}
