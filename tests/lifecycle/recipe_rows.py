"""Rows for the recipe runs' lifecycle tests: finished trials with a val_loss (the two_studies
fixture, in conftest.py, makes two studies of them)."""

from experiments.models import Trial


def trial(study, number, loss, **fields):
    return Trial.objects.create(study=study, trial_id=str(number - 1), number=number, status=Trial.Status.COMPLETED,
                                hyperparameters={"units": 8}, score=0.9, best_epoch=2,
                                metrics={"val_loss": loss, "val_accuracy": 0.9}, **fields)
