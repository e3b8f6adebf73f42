"""The tuners: the KerasTuner adapter (oracle: proposes and ends trials from what the service
hands it), Tuneboard's Bayesian tuner (bayesian), Optuna's samplers as KerasTuner oracles
(optuna_search), and a study's search space as KerasTuner HyperParameters (hyperparameters)."""
