"""Model-based Hyperband through the claim path (no training): its first bracket draws what plain Hyperband draws
with the same seed, and once a budget has enough results its new configurations come from the model instead."""

import math

import pytest

from experiments.services import studies, trial_claims
from experiments.services.trial_oracle import Outcome
from tests.integration.test_pruning import SPACE
from tests.lifecycle.test_pruning import ORACLES, Runner

pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings("ignore::DeprecationWarning:keras_tuner")]
HYPERBAND = {"search_space": SPACE, "epochs": 9, "patience": 9, "max_trials": 30, "seed": 5, "pruner": "none",
             "objective_metric": "val_loss", "objective_direction": "min", "parallelism": 1}


def _loss(values: dict) -> float:
    """A smooth valley around learning rate 0.01 and 12 units."""
    return abs(math.log10(values["learning_rate"]) + 2) + abs(values["units"] - 12) / 8


def _search(make_study, tuner: str) -> list[dict]:
    runner = Runner(studies.study_start(study=make_study(tuner=tuner, **HYPERBAND)))
    found = []
    for _ in range(HYPERBAND["max_trials"]):
        trial = runner.claim()
        epochs = int(trial.hyperparameters["tuner/epochs"]) - int(trial.hyperparameters["tuner/initial_epoch"])
        runner.report(trial, [_loss(trial.hyperparameters)] * epochs)
        trial_claims.finish_trial(trial_pk=trial.pk, oracles=ORACLES, outcome=Outcome(
            "completed", score=_loss(trial.hyperparameters), best_step=0, epochs_trained=epochs))
        found.append(trial.hyperparameters)
    return found


def test_its_first_bracket_is_random_and_later_ones_follow_the_model(make_study):
    plain, model_based = _search(make_study, "hyperband"), _search(make_study, "hyperband_tpe")
    assert plain[:3] == model_based[:3]  # too few results at any budget: the same random draws
    assert plain != model_based
    tail = slice(len(plain) // 2, None)  # the model's proposals cluster where the loss is low
    assert (sorted(_loss(v) for v in model_based[tail])[len(model_based[tail]) // 2]
            < sorted(_loss(v) for v in plain[tail])[len(plain[tail]) // 2])
