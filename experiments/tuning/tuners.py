"""What each tuner is, for the form, the API and the rules the service applies (pure Python: the
web never loads KerasTuner or Optuna; workers/tuners/oracle.py builds them)."""

# Tuners that start with random trials and then let a model of the results guide the search:
# "initial random trials" is theirs alone.
GUIDED_TUNERS = ("bayesian", "optuna_tpe", "optuna_gp")
# Tuners that run Hyperband's brackets: they stop weak trials themselves and need epochs to form rungs.
HYPERBAND_TUNERS = ("hyperband", "hyperband_tpe")

DESCRIPTIONS = {
    "random": "Random search: independent random configurations; a strong baseline for any budget.",
    "bayesian": "Bayesian optimisation (KerasTuner's Gaussian process with a properly fitted kernel): random "
                "initial trials, then each proposal where the process expects the best; for small budgets of "
                "numeric hyperparameters.",
    "hyperband": "Hyperband: many configurations on few epochs, the best continued on more; for long trainings.",
    "hyperband_tpe": "Model-based Hyperband: Hyperband's brackets, each bracket's new configurations proposed by TPE "
                     "from the results so far, ranked within each budget (a third stay random, as in BOHB); for long "
                     "trainings once a few brackets have run.",
    "grid": "Grid search: every combination of the (discrete) space, in order.",
    "optuna_tpe": "Optuna TPE (multivariate, grouped for conditional spaces): fast proposals that scale to large "
                  "budgets and spaces with choices and conditions.",
    "optuna_gp": "Optuna Gaussian process (log expected improvement): often the best for small budgets of numeric "
                 "hyperparameters; needs PyTorch on the workers.",
    "optuna_nsga2": "Optuna NSGA-II: a genetic algorithm over generations of trials; for large budgets.",
}


def tuner_help() -> str:
    return " ".join(DESCRIPTIONS.values())
