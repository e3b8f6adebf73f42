"""The Keras backends a worker runs: selection.py (which one, read from KERAS_BACKEND, and the
queues it may serve), child.py (a worker child's set-up before Keras loads), and one runtime
module per backend: where a trial's replicas run and how its data is fed, made real for
TensorFlow (tf_runtime: tf.distribute strategies, tf.data) or JAX (jax_runtime: keras.distribution
over the host's local devices, a PyDataset). workers/host/compute.py picks the runtime Keras runs
on; nothing imports a backend's runtime unless that backend is the one in use, so a JAX worker
never imports TensorFlow."""
