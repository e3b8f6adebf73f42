"""What a running trial reports each epoch (heartbeat, metrics, the pruner's verdict), on a path that never takes
the study's lock."""

import json
from dataclasses import dataclass

from django.conf import settings
from django.db import connection
from django.db.models import BooleanField, Value
from django.utils import timezone

from experiments.models import PruningReference, Study, Trial, TrialEpoch
from experiments.states import StudyStatus, TrialStatus
from experiments.tuning import pareto_pruning, pruners
from experiments.tuning.objectives import directions as objective_directions
from experiments.tuning.pruning_options import PruningSettings


def trial_heartbeat(*, trial_pk: int) -> bool:
    return bool(Trial.objects.filter(pk=trial_pk, status=TrialStatus.RUNNING).update(heartbeat=timezone.now()))


@dataclass(frozen=True)
class StudyPruning:
    """What the per-epoch record call needs of a pruning study; a worker reads it once per
    trial (a study's settings never change once created)."""

    study_id: int
    settings: PruningSettings
    objective: str
    direction: str
    epochs: int
    executions: int
    # Pareto pruning: every objective (primary first) with its direction, and the constraints.
    objectives: tuple = ()
    directions: tuple = ()
    constraints: tuple = ()

    @classmethod
    def for_study(cls, study: Study) -> "StudyPruning | None":
        settings = PruningSettings.from_study(study)
        if not settings.enabled:
            return None
        return cls(study.id, settings, study.objective_metric, study.objective_direction, study.epochs,
                   study.executions_per_trial,
                   objectives=(study.objective_metric, *(row["metric"] for row in study.extra_objectives)),
                   directions=tuple(objective_directions(study)), constraints=tuple(study.constraints))

    @property
    def pareto(self) -> bool:
        return self.settings.pruner == "pareto"

    @property
    def watched_directions(self) -> list[str]:
        """The directions of the objectives the Pareto pruner's points hold (pareto_pruning.watched)."""
        kept = [self.objective, *pareto_pruning.watched(list(self.objectives[1:]))]
        return [d for metric, d in zip(self.objectives, self.directions, strict=True) if metric in kept]


@dataclass(frozen=True)
class EpochVerdict:
    """The answer to an epoch report; truthy while the trial should go on."""

    keep_going: bool
    pruned: dict | None = None  # the pruner's decision when it stopped the trial
    preempted: bool = False  # fair share asked it to stop here and resume later (services/preemption.py)

    def __bool__(self) -> bool:
        return self.keep_going


def trial_epochs_carry(*, trial: Trial, resume: dict) -> None:
    """A retry that goes on from a preempted attempt's epoch gets the epochs before it as its own (from
    the attempt before, which holds them all), so its curve, its pruner and its best epoch see the whole run."""
    source = (Trial.objects.filter(study_id=trial.study_id, trial_id=trial.trial_id, attempt__lt=trial.attempt)
              .order_by("-attempt").values_list("pk", flat=True).first())
    rows = TrialEpoch.objects.filter(trial_id=source, epoch__lt=int(resume.get("epoch", 0)))
    TrialEpoch.objects.bulk_create([TrialEpoch(trial=trial, execution=row.execution, epoch=row.epoch,
                                               metrics=row.metrics, best_objective=row.best_objective,
                                               point=row.point)
                                    for row in rows], ignore_conflicts=True)


def trial_record_epoch(*, trial_pk: int, execution: int, epoch: int, metrics: dict,
                       pruning: StudyPruning | None = None, known: dict | None = None) -> EpochVerdict:
    """Store one epoch's metrics and bump the heartbeat; with `pruning`, also ask the study's
    pruner. The verdict is falsy when the trial should stop: its study was cancelled, the trial
    is no longer running, or the pruner stopped it (then `pruned` holds why). `known`: what the
    worker knew before training (the parameter count), which a Pareto pruner watches."""
    if pruning is None and connection.vendor == "postgresql":
        alive, preempted = _record_epoch_postgres(trial_pk, execution, epoch, metrics)
        return EpochVerdict(alive and not preempted, preempted=preempted)
    alive = Trial.objects.filter(
        pk=trial_pk, status=TrialStatus.RUNNING, study__status=StudyStatus.RUNNING
    ).update(heartbeat=timezone.now())
    if not alive:
        return EpochVerdict(False)
    best, decision, point = None, None, None
    if pruning is not None and pruning.pareto:
        best, point, decision = _judge_pareto(pruning, trial_pk, execution, epoch, metrics, known or {})
    elif pruning is not None:
        best, decision = _judge(pruning, trial_pk, execution, epoch, metrics)
    # One INSERT ... ON CONFLICT: a re-reported epoch replaces the earlier row.
    TrialEpoch.objects.bulk_create(
        [TrialEpoch(trial_id=trial_pk, execution=execution, epoch=epoch, metrics=metrics, best_objective=best,
                    point=None if point is None else point.record())],
        update_conflicts=True, unique_fields=["trial", "execution", "epoch"],
        update_fields=["metrics", "best_objective", "point"],
    )
    if decision is not None and decision.prune:
        return EpochVerdict(False, pruned=decision.record())
    if settings.PREEMPT_QUEUES and Trial.objects.filter(pk=trial_pk, preempted__isnull=False).exists():
        return EpochVerdict(False, preempted=True)  # this epoch is kept: the next attempt goes on from here
    return EpochVerdict(True)


def _record_epoch_postgres(trial_pk: int, execution: int, epoch: int, metrics: dict) -> tuple[bool, bool]:
    """trial_record_epoch without a pruner, in one statement (one round trip instead of two,
    on the path every epoch of every trial takes): the heartbeat UPDATE, and the epoch's row
    only if the trial and its study are still running. (Whether they are, whether it was preempted.)"""
    trial, study, epochs = Trial._meta.db_table, Study._meta.db_table, TrialEpoch._meta.db_table
    sql = (f'WITH alive AS (UPDATE "{trial}" t SET heartbeat = %s FROM "{study}" s WHERE t.id = %s '
           f"AND t.status = %s AND s.id = t.study_id AND s.status = %s RETURNING t.id, t.preempted), "
           f'written AS (INSERT INTO "{epochs}" (trial_id, execution, epoch, metrics, best_objective, created) '
           f"SELECT id, %s, %s, %s, NULL, %s FROM alive ON CONFLICT (trial_id, execution, epoch) "
           f"DO UPDATE SET metrics = EXCLUDED.metrics, best_objective = NULL RETURNING 1) "
           f"SELECT preempted IS NOT NULL FROM alive")
    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(sql, [now, trial_pk, TrialStatus.RUNNING, StudyStatus.RUNNING, execution, epoch,
                             json.dumps(metrics), now])
        row = cursor.fetchone()
        return row is not None, bool(row and row[0])


def _judge(pruning: StudyPruning, trial_pk: int, execution: int, epoch: int,
           metrics: dict) -> tuple[float | None, pruners.Decision | None]:
    """This epoch's best-so-far value and, when the epoch may be judged, the pruner's decision, in one query (two while
    the startup rule needs a count)."""
    settings, number = pruning.settings, epoch + 1
    last = execution == pruning.executions - 1 and number >= pruning.epochs
    judged = pruners.judged(settings, number, last=last) is None
    # (value, None) for the trial's own previous epoch, (value, completed) for finished trials.
    rows = (TrialEpoch.objects.filter(trial_id=trial_pk, execution=execution, epoch=epoch - 1)
            .order_by().values_list("best_objective", Value(None, output_field=BooleanField())))
    if judged:
        rows = rows.union(PruningReference.objects.filter(study_id=pruning.study_id, execution=execution, epoch=epoch)
                          .order_by().values_list("best_objective", "completed"), all=True)
    previous, others, completed = None, [], 0
    for value, finished_completed in rows:
        if finished_completed is None:
            previous = value
        else:
            others.append(value)
            completed += finished_completed
    best = pruners.best_so_far(previous, pruners.objective_value(metrics, pruning.objective), pruning.direction)
    if not judged or best is None or len(others) < settings.min_trials:
        return best, None
    if completed < settings.startup_trials:
        completed = Trial.objects.filter(study_id=pruning.study_id, status=TrialStatus.COMPLETED).count()
    return best, pruners.decide(settings=settings, direction=pruning.direction, execution=execution, epoch=number,
                                value=best, others=others, completed=completed, last=last)


def _judge_pareto(pruning: StudyPruning, trial_pk: int, execution: int, epoch: int, metrics: dict,
                  known: dict) -> tuple[float | None, "pareto_pruning.Point | None", pruners.Decision | None]:
    """_judge for several objectives: this epoch's point (the first objective's best so far, the other watched ones as
    reported) and, at a rung, the Pareto pruner's decision against the finished trials' points there."""
    settings, number = pruning.settings, epoch + 1
    last = execution == pruning.executions - 1 and number >= pruning.epochs
    previous = (TrialEpoch.objects.filter(trial_id=trial_pk, execution=execution, epoch=epoch - 1)
                .values_list("best_objective", flat=True).first())
    best = pruners.best_so_far(previous, pruners.objective_value(metrics, pruning.objective), pruning.direction)
    point = pareto_pruning.point(best=best, metrics=metrics, known=known, objectives=list(pruning.objectives),
                                 constraints=list(pruning.constraints))
    if pruners.judged(settings, number, last=last) is not None or point is None:
        return best, point, None
    rows = list(PruningReference.objects.filter(study_id=pruning.study_id, execution=execution, epoch=epoch,
                                                 point__isnull=False).values_list("point", "completed"))
    others = [found for record, _ in rows if (found := pareto_pruning.Point.from_record(record)) is not None]
    if len(others) < settings.min_trials:
        return best, point, None
    completed = sum(done for _, done in rows)
    if completed < settings.startup_trials:
        completed = Trial.objects.filter(study_id=pruning.study_id, status=TrialStatus.COMPLETED).count()
    return best, point, pareto_pruning.decide(settings=settings, directions=pruning.watched_directions,
                                              execution=execution, epoch=number, point=point, others=others,
                                              completed=completed, last=last)


def trial_keep_as_reference(study: Study, row: Trial, completed: bool) -> None:
    """A pruning study's finished trial becomes one its later trials are compared with."""
    if study.pruner == "none":
        return
    epochs = TrialEpoch.objects.filter(trial=row, best_objective__isnull=False).values_list(
        "execution", "epoch", "best_objective", "point")
    PruningReference.objects.bulk_create(
        [PruningReference(study=study, trial=row, execution=execution, epoch=epoch, best_objective=value,
                          completed=completed, point=point) for execution, epoch, value, point in epochs],
        ignore_conflicts=True)
