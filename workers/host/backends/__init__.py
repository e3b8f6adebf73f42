"""The Keras backends a worker runs: selection, a child's set-up, and one runtime per backend, imported only when
in use so a JAX worker never imports TensorFlow."""
