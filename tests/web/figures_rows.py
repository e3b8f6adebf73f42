"""Finished trials, models and ensembles made straight through the ORM (no worker), for the
tests of what figures say, how models rank and which limits decided a result."""

from datetime import timedelta

from django.utils import timezone

from experiments.models import EnsembleMember, TrainedModel, TrainedModelEpoch, Trial, TrialEpoch


def finished_trial(study, number: int, *, score: float = 0.9, best_epoch: int | None = None, epochs: int | None = None,
                   metrics: dict | None = None, **fields) -> Trial:
    """A completed trial with one epoch row per epoch; best epoch defaults to the study's last."""
    best_epoch = study.epochs if best_epoch is None else best_epoch
    trial = Trial.objects.create(
        study=study, trial_id=f"{number - 1}", number=number, status=Trial.Status.COMPLETED,
        hyperparameters={"units": 8, "learning_rate": 0.01}, score=score, best_epoch=best_epoch,
        metrics=metrics if metrics is not None else {"val_accuracy": score, "val_loss": 0.3, "accuracy": 0.95,
                                                      "loss": 0.2},
        duration_seconds=3.0, finished=timezone.now(), **fields)
    TrialEpoch.objects.bulk_create([
        TrialEpoch(trial=trial, epoch=e, metrics={"loss": 1 / (e + 1), "val_loss": 1.1 / (e + 1),
                                                  "accuracy": 0.5 + e / 100, "val_accuracy": 0.45 + e / 100})
        for e in range(epochs or study.epochs)])
    return trial


def finished_model(team, user, study, trial, *, name: str = "m", version: int = 1, test: dict | None = None,
                   val: dict | None = None, method: str = "retrain", epoch_source: str = "detect",
                   best_epoch: int = 5, epoch_cap: int = 100, minutes_ago: int = 0, phases: bool = False,
                   **fields) -> TrainedModel:
    when = timezone.now() - timedelta(minutes=minutes_ago)
    model = TrainedModel.objects.create(
        team=team, dataset=study.dataset, study=study, trial=trial, name=name, version=version, method=method,
        epoch_source=epoch_source if method == "retrain" else "", epoch_cap=epoch_cap, seed=1,
        hyperparameters=trial.hyperparameters, status=TrainedModel.Status.COMPLETED, best_epoch=best_epoch,
        epochs=int(best_epoch * 1.2), val_metrics=val if val is not None else {"accuracy": 0.9, "loss": 0.3},
        test_metrics=test if test is not None else {"accuracy": 0.9, "loss": 0.3}, created_by=user,
        created=when, finished=when, duration_seconds=2.0, **fields)
    if phases:
        TrainedModelEpoch.objects.bulk_create(
            [TrainedModelEpoch(model=model, phase="best_epoch", epoch=e,
                               metrics={"loss": 1 / (e + 1), "val_loss": 1.2 / (e + 1), "accuracy": 0.5 + e / 100,
                                        "val_accuracy": 0.4 + e / 100}) for e in range(best_epoch + 10)]
            + [TrainedModelEpoch(model=model, phase="retrain", epoch=e,
                                 metrics={"loss": 0.9 / (e + 1), "accuracy": 0.55 + e / 100})
               for e in range(int(best_epoch * 1.2))])
    return model


def finished_ensemble(team, user, dataset, members: list, weights: list[float], *, name: str = "blend",
                      test: dict | None = None) -> TrainedModel:
    """`members`: TrainedModels and Trials; the report as workers/ensembles/build.py writes it."""
    ensemble = TrainedModel.objects.create(
        team=team, kind=TrainedModel.Kind.ENSEMBLE, dataset=dataset, name=name, version=1, method="nelder_mead",
        seed=0, status=TrainedModel.Status.COMPLETED, val_metrics={"accuracy": 0.93, "loss": 0.2},
        test_metrics=test or {"accuracy": 0.92, "loss": 0.22}, created_by=user, finished=timezone.now(),
        duration_seconds=4.0,
        report={"method": "nelder_mead", "weights": weights,
                "members": [str(m) if isinstance(m, TrainedModel) else f"{m.study.name} trial {m.trial_id}"
                            for m in members],
                "comparison": {"ensemble": {"val": {"loss": 0.2}, "test": {"loss": 0.22}},
                               "mean": {"val": {"loss": 0.25}, "test": {"loss": 0.26}},
                               "best_member": {"label": str(members[0]), "val": {"loss": 0.1411},
                                               "test": {"loss": 0.3}}},
                "correlation": [[1.0 if i == j else 0.9 for j in members] for i in members]})
    for position, (member, weight) in enumerate(zip(members, weights, strict=True)):
        EnsembleMember.objects.create(
            ensemble=ensemble, position=position, weight=weight,
            model=member if isinstance(member, TrainedModel) else None,
            trial=member if isinstance(member, Trial) else None,
            val_metrics={"loss": 0.1411 + position / 100, "accuracy": 0.9}, test_metrics={"loss": 0.3})
    return ensemble
