"""Host device setup for worker processes (threads now; strategies and precision later)."""

import os


def configure_threads() -> None:
    """Cap TensorFlow's thread pools (TUNEBOARD_TF_THREADS) before any op runs: several
    worker processes on one host must not each claim every core."""
    threads = int(os.environ.get("TUNEBOARD_TF_THREADS", "0") or 0)
    if threads <= 0:
        return
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
