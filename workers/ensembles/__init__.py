"""Ensembles on a worker: weight fitting (blending: mean, Nelder–Mead, greedy; pure numpy/scipy),
the stacking meta-learner (stacking), a recipe's correlation cap (correlation_cap), the ensemble
as one Keras model built from its members (keras_models), and the build job's work (build)."""
