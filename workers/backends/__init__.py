"""One module per Keras backend: where a trial's replicas run and how its data is fed, made
real for TensorFlow (tf.distribute strategies, tf.data) or JAX (keras.distribution over the
host's local devices, a PyDataset). workers/compute.py picks the one Keras runs on; nothing
imports a backend's module unless that backend is the one in use, so a JAX worker never
imports TensorFlow."""
