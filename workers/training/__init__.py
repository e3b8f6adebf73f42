"""Fitting one trial, or a retrain's runs: a study's configuration and its TrialSpec
(configurations), the fit itself (fitting) with its callbacks, inference on the same input
pipelines, checkpoints, model building from hyperparameter values, a model's serving costs and the
per-process dataset cache."""
