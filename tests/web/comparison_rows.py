"""Studies of one dataset with scored trials made straight through the ORM (no worker), for
the study comparison's tests (web, API and browser)."""

from experiments.models import Trial
from tests.integration.helpers import saved_study

ACTIVATIONS = ["relu", "tanh", "gelu"]


def trial_values(number: int) -> dict:
    """Learning rate and activation vary with the trial number; `layers` never does."""
    return {"learning_rate": [0.001, 0.01, 0.1][number % 3], "activation": ACTIVATIONS[(number // 3) % 3],
            "layers": 2}


def scored_study(team, user, dataset, name: str, n: int, *, objective: str = "val_accuracy",
                 direction: str = "max", score=None, extra: dict | None = None, **options):
    """A saved study with `n` completed trials (numbers 1..n) whose score depends on the learning
    rate only (unless `score(number, values)` says otherwise), plus one failed trial after them."""
    study = saved_study(team, user, dataset, name=name, hypermodel="dense", objective_metric=objective,
                        objective_direction=direction, **options)
    score = score or (lambda number, values: {0.001: 0.7, 0.01: 0.9, 0.1: 0.5}[values["learning_rate"]]
                      + number * 1e-5)
    rows = []
    for number in range(1, n + 1):
        values = {**trial_values(number), **(extra or {})}
        value = score(number, values)
        rows.append(Trial(study=study, trial_id=f"{number - 1:03d}", number=number, status=Trial.Status.COMPLETED,
                          hyperparameters=values, score=value, best_epoch=2,
                          metrics={"val_loss": 0.4, "loss": 0.3, objective: value}))
    rows.append(Trial(study=study, trial_id=f"{n:03d}", number=n + 1, status=Trial.Status.FAILED,
                      hyperparameters=trial_values(n + 1), error="out of memory"))
    Trial.objects.bulk_create(rows)
    return study
