"""Keras's memory freed between the jobs a worker child runs one after another."""

_jobs_since_gc = 0


def release_memory(keras, *, trial_seconds: float) -> None:
    """Drop Keras's global state after every job; run the full garbage collection (slow
    without gc.freeze) after long jobs, where it costs nothing relatively, and every 20th short one."""
    global _jobs_since_gc
    _jobs_since_gc += 1
    collect = trial_seconds > 10 or _jobs_since_gc >= 20
    keras.backend.clear_session(free_memory=collect)
    if collect:
        _jobs_since_gc = 0
