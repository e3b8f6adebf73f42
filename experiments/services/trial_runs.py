"""Trial runs: a study's trials from claim to finish, and what keeps a running study moving
whatever happens to workers and the broker.

Every step holds the Study row lock (`SELECT ... FOR UPDATE`) for one short transaction, so
claims, finishes, cancels and the reaper are serialised per study across processes and
hosts. The tuner is driven through an adapter the caller passes in (`workers/oracle.py`'s
`KerasTunerOracles` on workers), so this module, like the whole web process, never imports
KerasTuner. States and their moves: `experiments/states.py`.

Slots: a study may run `parallelism` trials at once. A slot is busy while a trial runs in it
or while a wake-up for it is in the broker (`wakeups_pending`). A wake-up that does not reach
a worker within RESEND_AFTER_SECONDS (a Redis restart, a worker killed with the message) is
counted as lost and sent again, with backoff while nobody picks them up; duplicates are
harmless, because a task that finds every slot busy exits."""

import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from time import perf_counter
from typing import Protocol

from django.conf import settings
from django.db import connection, transaction
from django.db.models import BooleanField, Count, F, Q, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from experiments.errors import TuneboardError
from experiments.models import PruningReference, Study, Trial, TrialEpoch
from experiments.services.audit import audit_record
from experiments.services.notifications import notify_study_ended, notify_trial_lost
from experiments.services.queueing import trial_tasks_enqueue
from experiments.states import STUDY_MOVES, StudyStatus, TrialStatus
from experiments.tuning import pruners
from experiments.tuning.pruning_options import PruningSettings

log = logging.getLogger(__name__)
# An idle claim (the tuner waits for running trials) with nothing running asks again this soon.
IDLE_POLL_SECONDS = 2.0
MAX_RESEND_DOUBLINGS = 5


class Oracles(Protocol):
    """The tuner adapter; see workers/oracle.py. It never touches the database: `load` gets the
    study's trial rows from `trial_rows_since` (trial_rows_for_oracle), and `keep` (called once
    the transaction commits) lets it reuse a rebuilt oracle for the study's next load."""

    def load(self, study: Study, trial_rows_since: Callable[[int], Iterable[tuple[dict, dict]]]): ...
    def propose(self, study: Study, oracle, tuner_id: str, seed: dict | None = None): ...
    def complete(self, oracle, trial_id: str, *, objective: str, score: float, best_step: int | None): ...
    def fail(self, oracle, trial_id: str, *, error: str, lost: bool): ...
    def release(self, oracle, trial_id: str): ...
    def done(self, oracle) -> bool: ...
    def state(self, oracle) -> dict: ...
    def keep(self, study_id: int, version: int, oracle) -> None: ...


def trial_rows_for_oracle(study: Study) -> Callable[[int], Iterable[tuple[dict, dict]]]:
    """What the tuner adapter rebuilds the study's oracle from, read when it asks: given the
    oracle version it already holds, the (hyperparameters, kt_state) of every Trial row written
    since, oldest first (later attempts of a retried trial win)."""

    def since(version: int):
        return (Trial.objects.filter(study=study, oracle_version__gt=version).order_by("number")
                .values_list("hyperparameters", "kt_state"))

    return since


def _keep_oracle_on_commit(study: Study, oracles: Oracles, oracle, version: int) -> None:
    """The adapter may reuse the oracle (as of `version`) once this transaction commits; a
    rolled-back claim leaves nothing behind."""
    transaction.on_commit(lambda: oracles.keep(study.id, version, oracle))


@dataclass
class Claimant:
    tuner_id: str  # unique per claim: KerasTuner hands a known tuner id its old trial back
    worker_host: str
    worker_name: str = ""


@dataclass
class Claim:
    status: str  # "running" | "idle" | "stopped"
    trial: Trial | None = None
    values: dict = field(default_factory=dict)


@dataclass
class Outcome:
    # "completed" | "pruned" (its pruner stopped it: a result like a completed one) | "failed" |
    # "released" (stopped early with no fault of its own: the study
    # was cancelled or its worker shut down; it runs again later)
    status: str
    score: float | None = None
    best_step: int | None = None
    metrics: dict = field(default_factory=dict)
    error: str = ""
    checkpoint_id: int | None = None
    duration_seconds: float | None = None
    compute: dict = field(default_factory=dict)  # where and how it ran (workers/compute.py)
    environment: dict = field(default_factory=dict)  # what reproducing it takes (experiments/tuning/reproducibility.py)
    epochs_trained: int | None = None
    pruning: dict = field(default_factory=dict)  # the pruner's decision (pruners.Decision.record())


# --- studies ---------------------------------------------------------------------------


class StudyError(TuneboardError, ValueError):
    pass


def _move_study(study: Study, target: str, **fields) -> None:
    if target not in STUDY_MOVES[study.status]:
        raise StudyError(f"A {study.get_status_display().lower()} study cannot become {target}.")
    study.status = target
    for name, value in fields.items():
        setattr(study, name, value)
    study.save(update_fields=["status", *fields])


def _locked(study_id: int) -> Study:
    return Study.objects.select_for_update().get(pk=study_id)


def study_wake(study: Study, count: int, *, countdown: float | None = None) -> None:
    """Send `count` wake-ups once the transaction commits; the caller holds the study's lock."""
    if count <= 0:
        return
    study.wakeups_pending += count
    study.last_wakeup = timezone.now()
    study.save(update_fields=["wakeups_pending", "last_wakeup", "wakeup_resends"])
    trial_tasks_enqueue(study_id=study.id, queue=study.queue, count=count, countdown=countdown,
                        unsent=_wakeups_unsent(study.id))


def _wakeups_unsent(study_id: int):
    """Wake-ups the broker refused are not in flight: they stop covering slots, the study
    counts as never woken (the reaper's next pass sends them) and the attempt is not an
    unanswered resend (no backoff while the broker is down)."""

    def unsent(count: int) -> None:
        Study.objects.filter(pk=study_id).update(
            wakeups_pending=Greatest(F("wakeups_pending") - count, 0), last_wakeup=None,
            wakeup_resends=Greatest(F("wakeup_resends") - 1, 0))

    return unsent


def study_start(*, study: Study) -> Study:
    """Start a new study, or resume a cancelled or failed one where it left off. Failures
    before this start no longer count towards max_consecutive_failed_trials."""
    with transaction.atomic():
        study = _locked(study.pk)
        if not study.can_start:
            raise StudyError(f"The study is {study.get_status_display().lower()}; it cannot be started now.")
        now = timezone.now()
        _move_study(study, StudyStatus.RUNNING, message="", started=study.started or now, finished=None,
                    last_activity=now, failures_counted_from=len((study.oracle_state or {}).get("end_order", [])),
                    wakeups_pending=0, wakeup_resends=0)
        study_wake(study, study.parallelism)
    return study


def study_resume(*, study: Study) -> Study:
    """study_start for a study that ran before (the API's resume refuses a first start)."""
    if study.started is None:
        raise StudyError("The study has never started; start it instead.")
    return study_start(study=study)


def study_cancel(*, study: Study) -> Study:
    """Stop the study; each running trial notices at its next epoch end and stops (a trial
    that completes meanwhile keeps its result)."""
    with transaction.atomic():
        study = _locked(study.pk)
        if study.status != StudyStatus.RUNNING:
            raise StudyError("Only a running study can be cancelled.")
        _move_study(study, StudyStatus.CANCELLED, message="Cancelled by a user.", finished=timezone.now())
        audit_record(verb="study.cancel", obj=study, team_id=study.team_id)
    return study


def _complete_if_done(study: Study, oracle_done: bool, running: int) -> bool:
    if not oracle_done or running or study.status != StudyStatus.RUNNING:
        return False
    if not Trial.objects.filter(study=study, status__in=[TrialStatus.COMPLETED, TrialStatus.PRUNED]).exists():
        # The budget is spent and nothing succeeded: that is a failed study, whatever the count of
        # failures in a row (a wrong Fixed value in a small budget ended "completed" before).
        last = Trial.objects.filter(study=study, status=TrialStatus.FAILED).order_by("-number").first()
        reason = f" The last error — trial {last.trial_id}: {last.error}" if last else ""
        _move_study(study, StudyStatus.FAILED, finished=timezone.now(),
                    message=f"The budget is spent and no trial completed.{reason}")
    else:
        _move_study(study, StudyStatus.COMPLETED, finished=timezone.now(), message="")
    notify_study_ended(study=study)
    return True


def _fail_after_failures(study: Study) -> None:
    errors = list(
        Trial.objects.filter(study=study, status=TrialStatus.FAILED)
        .order_by("-number").values_list("trial_id", "error")[: study.max_consecutive_failed_trials]
    )
    detail = "; ".join(f"trial {tid}: {err}" for tid, err in errors)
    _move_study(study, StudyStatus.FAILED, finished=timezone.now(),
                message=f"{study.max_consecutive_failed_trials} trials failed in a row. Last errors — {detail}")
    notify_study_ended(study=study)


# --- trials ----------------------------------------------------------------------------


def trial_running_count(*, study: Study) -> int:
    return Trial.objects.filter(study=study, status=TrialStatus.RUNNING).count()


@dataclass
class _Counts:
    started: int  # trial rows (attempts) so far: the next one's number is this + 1
    running: int
    untold: int  # LOST by the reaper, the tuner not told yet


def _trial_counts(study: Study) -> _Counts:
    """What a claim or finish needs to know of the study's trials, in one query."""
    return _Counts(**Trial.objects.filter(study=study).aggregate(
        started=Count("id"), running=Count("id", filter=Q(status=TrialStatus.RUNNING)),
        untold=Count("id", filter=Q(status=TrialStatus.LOST, kt_state__has_key=TELL_TUNER))))


def _create_running(study: Study, proposal, claimant: Claimant, seeded_from_id: int | None,
                    claim_started: float | None, started: int) -> Trial:
    attempts = 0
    if proposal.retry:  # its earlier attempts: a retried seed is still the seed
        earlier = list(Trial.objects.filter(study=study, trial_id=proposal.trial_id)
                       .values_list("seeded_from_id", flat=True).order_by("-attempt"))
        attempts = len(earlier)
        seeded_from_id = earlier[0] if earlier else seeded_from_id
    now = timezone.now()
    # Timed up to this INSERT, so it costs no query of its own; the INSERT, the study's
    # UPDATE and the commit that follow (a few ms) are not counted.
    claim_ms = None if claim_started is None else (perf_counter() - claim_started) * 1000
    return Trial.objects.create(
        study=study, trial_id=proposal.trial_id, number=started + 1, attempt=attempts + 1,
        status=TrialStatus.RUNNING, hyperparameters=proposal.values, kt_state=proposal.state,
        oracle_version=study.oracle_version + 1, tuner_id=claimant.tuner_id, worker_host=claimant.worker_host,
        worker_name=claimant.worker_name, started=now, heartbeat=now, seeded_from_id=seeded_from_id,
        claim_ms=claim_ms,
    )


def _save_oracle(study: Study, oracles: Oracles, oracle) -> None:
    """The oracle's state as the next version (rows changed in this transaction carry it),
    with the slot counters changed in the same step: one UPDATE of the study row."""
    study.oracle_state = oracles.state(oracle)
    _keep_oracle_on_commit(study, oracles, oracle, study.oracle_version + 1)
    study.oracle_version += 1
    study.last_activity = timezone.now()
    study.save(update_fields=["oracle_state", "oracle_version", "last_activity", "wakeups_pending",
                              "wakeup_resends", "seeds_used"])


def _next_seed(study: Study) -> dict | None:
    return study.seeds[study.seeds_used] if study.seeds_used < len(study.seeds) else None


def _claim_locked(study: Study, oracles: Oracles, oracle, claimant: Claimant, counts: _Counts,
                  claim_started: float | None = None) -> Claim:
    # Warm-start seeds go before the tuner's proposals: the tuner registers each as if it had
    # proposed it (a retry waiting in the tuner still goes first and leaves the seed for later).
    seed = _next_seed(study)
    proposal = oracles.propose(study, oracle, claimant.tuner_id, seed=None if seed is None else seed["hyperparameters"])
    if proposal.status == "idle":
        _keep_oracle_on_commit(study, oracles, oracle, study.oracle_version)  # unchanged: the next poll reuses it
        if counts.running == 0:  # nothing will finish to wake it: ask again shortly
            study_wake(study, 1, countdown=IDLE_POLL_SECONDS)
        return Claim("idle")
    if proposal.status != "running":
        _complete_if_done(study, True, counts.running)
        return Claim("stopped")
    seeded_from_id = None
    if seed is not None and proposal.seeded:
        study.seeds_used += 1  # saved with the oracle state
        seeded_from_id = Trial.objects.filter(pk=seed["trial"]).values_list("pk", flat=True).first()
    row = _create_running(study, proposal, claimant, seeded_from_id, claim_started, counts.started)
    study.wakeup_resends = 0  # wake-ups are reaching workers (saved with the oracle state)
    return Claim("running", trial=row, values=dict(proposal.values))


def claim_trial(*, study_id: int, claimant: Claimant, oracles: Oracles) -> Claim:
    """A wake-up arrived: take a free slot's next trial, if the study has one to give."""
    started = perf_counter()  # before the lock: waiting for it is part of a claim's latency
    with transaction.atomic():
        study = _locked(study_id)
        arrived = study.wakeups_pending > 0
        if arrived:
            study.wakeups_pending -= 1
        claim = Claim("stopped")
        counts = _trial_counts(study) if study.status == StudyStatus.RUNNING else None
        # Not running, or a duplicated wake-up when every slot is busy: nothing to claim.
        told = Told()
        if counts is not None and counts.running < study.parallelism:
            oracle = oracles.load(study, trial_rows_for_oracle(study))
            told = _tell_tuner_of_lost(study, oracles, oracle) if counts.untold else told
            if told.failure_limit:
                _fail_after_failures(study)
            else:
                claim = _claim_locked(study, oracles, oracle, claimant, counts, started)
        if claim.status == "running" or told.count:
            _save_oracle(study, oracles, oracle)
        elif arrived:
            study.save(update_fields=["wakeups_pending"])
        return claim


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

    @classmethod
    def for_study(cls, study: Study) -> "StudyPruning | None":
        settings = PruningSettings.from_study(study)
        if not settings.enabled:
            return None
        return cls(study.id, settings, study.objective_metric, study.objective_direction, study.epochs,
                   study.executions_per_trial)


@dataclass(frozen=True)
class EpochVerdict:
    """The answer to an epoch report; truthy while the trial should go on."""

    keep_going: bool
    pruned: dict | None = None  # the pruner's decision when it stopped the trial

    def __bool__(self) -> bool:
        return self.keep_going


def trial_record_epoch(*, trial_pk: int, execution: int, epoch: int, metrics: dict,
                       pruning: StudyPruning | None = None) -> EpochVerdict:
    """Store one epoch's metrics and bump the heartbeat; with `pruning`, also ask the study's
    pruner. The verdict is falsy when the trial should stop: its study was cancelled, the trial
    is no longer running, or the pruner stopped it (then `pruned` holds why)."""
    if pruning is None and connection.vendor == "postgresql":
        return EpochVerdict(_record_epoch_postgres(trial_pk, execution, epoch, metrics))
    alive = Trial.objects.filter(
        pk=trial_pk, status=TrialStatus.RUNNING, study__status=StudyStatus.RUNNING
    ).update(heartbeat=timezone.now())
    if not alive:
        return EpochVerdict(False)
    best, decision = None, None
    if pruning is not None:
        best, decision = _judge(pruning, trial_pk, execution, epoch, metrics)
    # One INSERT ... ON CONFLICT: a re-reported epoch replaces the earlier row.
    TrialEpoch.objects.bulk_create(
        [TrialEpoch(trial_id=trial_pk, execution=execution, epoch=epoch, metrics=metrics, best_objective=best)],
        update_conflicts=True, unique_fields=["trial", "execution", "epoch"],
        update_fields=["metrics", "best_objective"],
    )
    if decision is not None and decision.prune:
        return EpochVerdict(False, pruned=decision.record())
    return EpochVerdict(True)


def _record_epoch_postgres(trial_pk: int, execution: int, epoch: int, metrics: dict) -> bool:
    """trial_record_epoch without a pruner, in one statement (one round trip instead of two,
    on the path every epoch of every trial takes): the heartbeat UPDATE, and the epoch's row
    only if the trial and its study are still running. True when they are."""
    trial, study, epochs = Trial._meta.db_table, Study._meta.db_table, TrialEpoch._meta.db_table
    sql = (f'WITH alive AS (UPDATE "{trial}" t SET heartbeat = %s FROM "{study}" s WHERE t.id = %s '
           f"AND t.status = %s AND s.id = t.study_id AND s.status = %s RETURNING t.id) "
           f'INSERT INTO "{epochs}" (trial_id, execution, epoch, metrics, best_objective, created) '
           f"SELECT id, %s, %s, %s, NULL, %s FROM alive ON CONFLICT (trial_id, execution, epoch) "
           f"DO UPDATE SET metrics = EXCLUDED.metrics, best_objective = NULL RETURNING 1")
    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(sql, [now, trial_pk, TrialStatus.RUNNING, StudyStatus.RUNNING, execution, epoch,
                             json.dumps(metrics), now])
        return cursor.fetchone() is not None


def _judge(pruning: StudyPruning, trial_pk: int, execution: int, epoch: int,
           metrics: dict) -> tuple[float | None, pruners.Decision | None]:
    """This epoch's best-so-far value and, when the epoch may be judged, the pruner's decision.
    One query reads the trial's previous best and the finished trials' bests at this epoch; the
    completed trials are counted by a second only while the ones at this epoch are too few to
    pass the startup rule themselves."""
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


def _keep_as_reference(study: Study, row: Trial, completed: bool) -> None:
    """A pruning study's finished trial becomes one its later trials are compared with."""
    if study.pruner == "none":
        return
    epochs = TrialEpoch.objects.filter(trial=row, best_objective__isnull=False).values_list(
        "execution", "epoch", "best_objective")
    PruningReference.objects.bulk_create(
        [PruningReference(study=study, trial=row, execution=execution, epoch=epoch, best_objective=value,
                          completed=completed) for execution, epoch, value in epochs], ignore_conflicts=True)


def _finish_row(trial: Trial, study: Study, status: str, kt_state: dict, outcome: Outcome, **fields) -> None:
    now = timezone.now()
    trial.status, trial.kt_state, trial.finished = status, kt_state, now
    trial.oracle_version = study.oracle_version + 1  # the version _save_oracle is about to write
    trial.duration_seconds = outcome.duration_seconds or (now - trial.started).total_seconds()
    for name, value in fields.items():
        setattr(trial, name, value)
    trial.save(update_fields=["status", "kt_state", "finished", "oracle_version", "duration_seconds", *fields])


RELEASED_REASON = "Stopped before it finished (the study was cancelled or its worker shut down); it runs again."


def _record(study: Study, row: Trial, outcome: Outcome, oracles: Oracles, oracle) -> bool:
    """Write the outcome to the oracle and the row; True when the failure limit was reached."""
    running_study = study.status == StudyStatus.RUNNING
    if outcome.status in ("completed", "pruned"):
        # Always kept, even when the study was cancelled meanwhile: a result is never thrown away.
        # A pruned trial reaches the tuner as a completed one whose score is its best value
        # before it was stopped (the value the pruner judged, scored like a completed trial's
        # best epoch): the Bayesian tuner's Gaussian process learns that the region is poor.
        ended = oracles.complete(oracle, row.trial_id, objective=study.objective_metric, score=outcome.score,
                                 best_step=outcome.best_step)
        status = TrialStatus.PRUNED if outcome.status == "pruned" else TrialStatus.COMPLETED
        _finish_row(row, study, status, ended.state, outcome, score=outcome.score,
                    best_epoch=None if outcome.best_step is None else outcome.best_step + 1,
                    metrics=outcome.metrics, checkpoint_id=outcome.checkpoint_id, compute=outcome.compute,
                    environment=outcome.environment, epochs_trained=outcome.epochs_trained, pruning=outcome.pruning)
        _keep_as_reference(study, row, completed=status == TrialStatus.COMPLETED)
    elif outcome.status == "failed":
        ended = oracles.fail(oracle, row.trial_id, error=outcome.error, lost=False)
        _finish_row(row, study, TrialStatus.FAILED, ended.state, outcome, error=outcome.error or "The trial failed.",
                    environment=outcome.environment)
    else:  # released: no penalty, it runs again (now, or when the study is resumed)
        ended = oracles.release(oracle, row.trial_id)
        _finish_row(row, study, TrialStatus.CANCELLED, ended.state, outcome, error=outcome.error or RELEASED_REASON)
    return running_study and ended.failure_limit_reached


@dataclass
class Finish:
    claim: Claim | None = None  # the finisher's next trial, claimed under the same lock


def finish_trial(*, trial_pk: int, outcome: Outcome, oracles: Oracles,
                 next_claimant: Claimant | None = None, study_id: int | None = None) -> Finish:
    """Record a trial's outcome and keep the study's slots filled: with `next_claimant` the
    finisher claims the next trial under the same lock (no second oracle load, no trip through
    the broker); free slots get wake-ups."""
    with transaction.atomic():
        if study_id is None:
            study_id = Trial.objects.values_list("study_id", flat=True).get(pk=trial_pk)
        study = _locked(study_id)
        row = Trial.objects.select_for_update().get(pk=trial_pk)
        row.study = study
        if row.status != TrialStatus.RUNNING:
            return Finish()  # finished trials are immutable (the reaper got there first)
        counts = _trial_counts(study)
        oracle = oracles.load(study, trial_rows_for_oracle(study))
        told = _tell_tuner_of_lost(study, oracles, oracle) if counts.untold else Told()
        # As in _record: reaching the failure limit only ends a study that is still running.
        failure_limit = _record(study, row, outcome, oracles, oracle) or (
            told.failure_limit and study.status == StudyStatus.RUNNING)
        counts.running -= 1  # this trial
        finish = Finish()
        if failure_limit:
            _fail_after_failures(study)
        elif study.status == StudyStatus.RUNNING:
            finish = _fill_slots(study, oracles, oracle, next_claimant, counts)
        _save_oracle(study, oracles, oracle)
        return finish


def _fill_slots(study: Study, oracles: Oracles, oracle, next_claimant: Claimant | None, counts: _Counts) -> Finish:
    running = counts.running
    if _complete_if_done(study, oracles.done(oracle), running):
        return Finish()
    claim = None
    if next_claimant is not None and running < study.parallelism:
        claim = _claim_locked(study, oracles, oracle, next_claimant, counts)
        if claim.status == "running":
            running += 1
        else:
            return Finish(claim)  # the tuner waits for running trials: their finishes refill
    study_wake(study, study.parallelism - running - study.wakeups_pending)
    return Finish(claim)


# --- the reaper ------------------------------------------------------------------------


# The reaper marks a lost trial in the database alone (it runs in the worker's main process,
# which never loads KerasTuner); this kt_state key says the tuner has not heard of it yet and
# how it should (fail: a lost attempt that counts; release: runs again without penalty).
TELL_TUNER = "tuneboard_tell"


@dataclass
class Told:
    count: int = 0
    failure_limit: bool = False


def _tell_tuner_of_lost(study: Study, oracles: Oracles, oracle) -> Told:
    """Tell the loaded tuner of trials the reaper marked LOST since it last ran; the caller
    holds the study's lock and saves the oracle state when `count` is non-zero."""
    told = Told()
    for row in Trial.objects.filter(study=study, status=TrialStatus.LOST, kt_state__has_key=TELL_TUNER):
        if row.kt_state[TELL_TUNER] == "fail":
            ended = oracles.fail(oracle, row.trial_id, error=row.error, lost=True)
            told.failure_limit = told.failure_limit or ended.failure_limit_reached
        else:
            ended = oracles.release(oracle, row.trial_id)
        row.kt_state, row.oracle_version = ended.state, study.oracle_version + 1
        row.save(update_fields=["kt_state", "oracle_version"])
        told.count += 1
    return told


def trials_reap_stale(*, now=None) -> int:
    """RUNNING trials whose heartbeat went stale are LOST (their worker died) and their slots
    get wake-ups; the tuner hears of it at the study's next claim (so max_retries_per_trial
    applies). Database only, so it runs beside busy trials in the worker's main process. One
    bad row is logged and skipped; it never stops the others."""
    now = now or timezone.now()
    stale_before = now - timedelta(seconds=settings.TRIAL_STALE_SECONDS)
    stale = Trial.objects.filter(status=TrialStatus.RUNNING, heartbeat__lt=stale_before)
    reaped = 0
    for pk, study_id, worker in stale.values_list("pk", "study_id", "worker_name"):
        error = (f"Lost: the worker {worker or 'running it'} stopped heartbeating "
                 f"for over {settings.TRIAL_STALE_SECONDS}s.")
        try:
            reaped += _reap_trial(pk, study_id, stale_before, error)
        except Exception:
            log.exception("the reaper could not finish lost trial %s; it tries again next time", pk,
                          extra={"study_id": study_id, "trial_id": pk})
    return reaped


def _reap_trial(pk: int, study_id: int, stale_before, error: str) -> bool:
    with transaction.atomic():
        study = _locked(study_id)
        row = Trial.objects.select_for_update().get(pk=pk)
        if row.status != TrialStatus.RUNNING or row.heartbeat >= stale_before:
            return False  # it finished, or heartbeat, since the reaper looked: its worker is alive
        row.study = study
        counts = study.status == StudyStatus.RUNNING
        now = timezone.now()
        row.status, row.error, row.finished = TrialStatus.LOST, error, now
        row.duration_seconds = (now - row.started).total_seconds()
        row.kt_state = {**row.kt_state, TELL_TUNER: "fail" if counts else "release"}
        row.save(update_fields=["status", "error", "finished", "duration_seconds", "kt_state"])
        notify_trial_lost(trial=row, study=study, runs_again=counts)
        if counts:
            study_wake(study, study.parallelism - trial_running_count(study=study) - study.wakeups_pending)
        return True


def resend_due(last_sent, resends: int, now) -> bool:
    """True when a message sent at `last_sent` and still not picked up counts as lost. The wait
    doubles with each unanswered resend (capped), so a queue nobody serves does not fill up."""
    wait = settings.RESEND_AFTER_SECONDS * 2 ** min(resends, MAX_RESEND_DOUBLINGS)
    return last_sent is None or last_sent < now - timedelta(seconds=wait)


def studies_refill(*, now=None) -> int:
    """Running studies with free slots that no wake-up in flight covers get wake-ups, busy or
    not: a wake-up lost by the broker never leaves a study running on fewer slots."""
    now = now or timezone.now()
    sent = 0
    for study_id in Study.objects.filter(status=StudyStatus.RUNNING).values_list("pk", flat=True):
        try:
            with transaction.atomic():
                study = Study.objects.select_for_update(skip_locked=True).filter(pk=study_id).first()
                if study is None or study.status != StudyStatus.RUNNING:
                    continue  # busy under someone's lock right now, or it just ended
                if not resend_due(study.last_wakeup, study.wakeup_resends, now):
                    continue
                missing = study.parallelism - trial_running_count(study=study)
                if missing <= 0:
                    continue
                study.wakeups_pending = 0  # what was sent this long ago is not coming
                study.wakeup_resends += 1
                study_wake(study, missing)
                sent += missing
        except Exception:
            log.exception("the reaper could not refill study %s; it tries again next time", study_id,
                          extra={"study_id": study_id})
    return sent
