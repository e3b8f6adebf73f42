"""The tuners: the KerasTuner adapter, Tuneboard's Bayesian tuner, Optuna's samplers and search spaces as
HyperParameters (docs/design/distributed-search.md)."""
