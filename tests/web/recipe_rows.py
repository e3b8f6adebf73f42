"""Rows for the ensemble recipes' tests: studies of one dataset with finished trials, and a
recipe's form data (pages and API post the same fields)."""

from experiments.models import Study, Trial
from tests.integration.helpers import saved_study


def trials(study: Study, losses: list[float], *, pruned: tuple[int, ...] = ()) -> list[Trial]:
    """Finished trials numbered 1.. with these val_loss figures (pruned: their numbers)."""
    rows = []
    for number, loss in enumerate(losses, start=1):
        status = Trial.Status.PRUNED if number in pruned else Trial.Status.COMPLETED
        rows.append(Trial.objects.create(study=study, trial_id=str(number), number=number, status=status,
                                         hyperparameters={"units": number}, score=1 - loss, best_epoch=2,
                                         metrics={"val_loss": loss, "val_accuracy": 1 - loss}))
    return rows


def study_with_trials(team, user, dataset, name: str, hypermodel: str, losses: list[float],
                      pruned: tuple[int, ...] = ()) -> Study:
    study = saved_study(team, user, dataset, name=name, hypermodel=hypermodel)
    trials(study, losses, pruned=pruned)
    return study


def recipe_data(dataset, *studies, **changes) -> dict:
    """A recipe's fields as the page posts them (the API takes the same names)."""
    return {"name": "diverse", "description": "", "dataset": dataset.id,
            "source_studies": [s.id for s in studies], "source_tag": "", "metric": "val_loss", "direction": "min",
            "top_k": 3, "per_group_max": 1, "group_by": "hypermodel", "members_as": "retrained",
            "method": "nelder_mead", "greedy_rounds": 50, "trigger": "manual", "register_as": "", "alias": "",
            "correlation_cap": "", **changes}
