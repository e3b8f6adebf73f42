"""Reads of a trial's re-runs, each with how close it came to the trial."""

from experiments.models import Trial, TrialRerun, TrialRerunEpoch
from experiments.tuning.reproducibility import rerun_comparison


def trial_reruns(*, trial: Trial) -> list:
    """The trial's re-runs, newest first; each carries its epoch rows and, once completed, how
    close it came to the trial (experiments/tuning/reproducibility.py)."""
    reruns = list(TrialRerun.objects.filter(trial=trial).order_by("-number"))
    rows: dict[int, list[dict]] = {}
    for row in TrialRerunEpoch.objects.filter(rerun__trial=trial).values("rerun_id", "execution", "epoch", "metrics"):
        rows.setdefault(row.pop("rerun_id"), []).append(row)
    original = {"score": trial.score, "best_epoch": trial.best_epoch, "metrics": trial.metrics,
                "environment": trial.environment}
    for rerun in reruns:
        rerun.epoch_rows = rows.get(rerun.pk, [])
        rerun.comparison = None
        if rerun.status == TrialRerun.Status.COMPLETED:
            rerun.comparison = rerun_comparison(
                objective=trial.study.objective_metric, original=original,
                rerun={"score": rerun.score, "best_epoch": rerun.best_epoch, "metrics": rerun.metrics,
                       "environment": rerun.environment})
    return reruns
