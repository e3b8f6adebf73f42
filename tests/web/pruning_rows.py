"""A pruning study with completed and pruned trials made straight through the ORM (no worker),
for the pages' and the API's tests."""

from experiments.models import Study, Trial
from tests.web.figures_rows import finished_trial


def pruned_trial(study, number: int, *, epoch: int, score: float, **fields) -> Trial:
    """A trial the median pruner stopped after `epoch` epochs, with one epoch row per epoch."""
    trial = finished_trial(study, number, score=score, epochs=epoch, best_epoch=epoch, **fields)
    Trial.objects.filter(pk=trial.pk).update(
        status=Trial.Status.PRUNED, epochs_trained=epoch,
        pruning={"prune": True, "reason": "pruned", "pruner": "median", "execution": 0, "epoch": epoch,
                 "value": score, "threshold": 0.8, "compared": 3, "rung": None})
    trial.refresh_from_db()
    return trial


def seed_pruning_study(study) -> Study:
    """10 epochs a trial, median pruner: trials 1 and 2 completed, 3 and 4 pruned after 2 and 3
    epochs (so pruning saved 8 + 7 epochs)."""
    Study.objects.filter(pk=study.pk).update(pruner="median", epochs=10)
    study.refresh_from_db()
    finished_trial(study, 1, score=0.9, epochs=10, epochs_trained=10)
    finished_trial(study, 2, score=0.85, epochs=10, epochs_trained=10)
    pruned_trial(study, 3, epoch=2, score=0.5)
    pruned_trial(study, 4, epoch=3, score=0.6)
    return study
