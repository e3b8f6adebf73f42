"""Trial claims and finishes, each one short transaction under the Study row lock, so claims, finishes and the
reaper are serialised per study across hosts (docs/design/distributed-search.md)."""

import logging
from dataclasses import dataclass
from time import perf_counter

from django.db import DatabaseError, transaction
from django.db.models import Count, Q
from django.utils import timezone

from experiments.errors import TunerUnavailable
from experiments.models import Study, Trial
from experiments.selectors.trials import WITH_RESULTS as RESULTS
from experiments.services.fair_share import (
    Route,
    slot_hold,
    slot_pass_on,
    slot_route,
    slot_wait,
    team_quota_locked,
)
from experiments.services.job_kinds import JOB_KINDS, JobKind
from experiments.services.jobs import job_claim_own, job_send_again
from experiments.services.notifications import notify_study_ended
from experiments.services.preemption import trial_resume_forget
from experiments.services.studies import study_device_budget_spent, study_locked, study_move, study_wake
from experiments.services.trial_epochs import trial_epochs_carry, trial_keep_as_reference
from experiments.services.trial_oracle import (
    TELL_TUNER,
    Claim,
    Claimant,
    Finish,
    Oracles,
    Outcome,
    Told,
    trial_rows_for_oracle,
)
from experiments.signals import study_completed, trial_finished
from experiments.states import StudyStatus, TrialStatus
from experiments.tuning.objectives import violations
from experiments.tuning.stopping_rules import StoppingRules, stop_reason

log = logging.getLogger(__name__)
# An idle claim (the tuner waits for running trials) with nothing running asks again this soon.
IDLE_POLL_SECONDS = 2.0


def _keep_oracle_on_commit(study: Study, oracles: Oracles, oracle, version: int) -> None:
    """The adapter may reuse the oracle (as of `version`) once this transaction commits; a
    rolled-back claim leaves nothing behind."""
    transaction.on_commit(lambda: oracles.keep(study.id, version, oracle))


def _complete_if_done(study: Study, oracle_done: bool, running: int) -> bool:
    if not oracle_done or running or study.status != StudyStatus.RUNNING:
        return False
    if not Trial.objects.filter(study=study, status__in=RESULTS).exists():
        # The budget is spent and nothing succeeded: that is a failed study, whatever the count of
        # failures in a row (a wrong Fixed value in a small budget ended "completed" before).
        last = Trial.objects.filter(study=study, status=TrialStatus.FAILED).order_by("-number").first()
        reason = f" The last error — trial {last.trial_id}: {last.error}" if last else ""
        study_move(study, StudyStatus.FAILED, finished=timezone.now(),
                    message=f"The budget is spent and no trial completed.{reason}")
    else:
        study_move(study, StudyStatus.COMPLETED, finished=timezone.now(), message="")
        study_completed.send(sender=Study, study_id=study.id)  # recipes with this trigger start after the commit
    notify_study_ended(study=study)
    return True


def _stop_early(study: Study, outcome: Outcome, *, budget_spent: bool) -> bool:
    """End a running study whose stopping rule this result met (the caller holds its lock).
    Running trials stop at their next epoch end, as after a cancel; no trial is claimed after."""
    rules = StoppingRules.from_study(study)
    if not rules.enabled or budget_spent or outcome.status not in RESULTS:
        return False  # a spent budget ends it the ordinary way, _complete_if_done
    # An infeasible trial (it breaks a constraint) reaches no target and is no improvement.
    results = (Trial.objects.filter(study=study, status__in=RESULTS, score__isnull=False).exclude(feasible=False)
               .order_by("number").values_list("number", "score"))
    since = study.segments[-1]["first_trial"] if study.segments else 1
    return _stop_with(study, stop_reason(rules, results=results, direction=study.objective_direction,
                                         metric=study.objective_metric, since=since))


def _stop_for_device_hours(study: Study) -> bool:
    """End a running study whose finished trials have used its device-hour budget (the caller
    holds its lock); as _stop_early, running trials stop at their next epoch end."""
    return _stop_with(study, study_device_budget_spent(study))


def _stop_with(study: Study, reason: str | None) -> bool:
    """COMPLETED with `reason` (a stopping rule met), told to recipes and subscribers; False when no reason."""
    if reason is None:
        return False
    study_move(study, StudyStatus.COMPLETED, finished=timezone.now(), message=reason)
    study_completed.send(sender=Study, study_id=study.id)
    notify_study_ended(study=study)
    return True


def _fail_after_failures(study: Study) -> None:
    errors = list(
        Trial.objects.filter(study=study, status=TrialStatus.FAILED)
        .order_by("-number").values_list("trial_id", "error")[: study.max_consecutive_failed_trials]
    )
    detail = "; ".join(f"trial {tid}: {err}" for tid, err in errors)
    study_move(study, StudyStatus.FAILED, finished=timezone.now(),
                message=f"{study.max_consecutive_failed_trials} trials failed in a row. Last errors — {detail}")
    notify_study_ended(study=study)


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
    attempts, resume = 0, {}
    if proposal.retry:  # its earlier attempts: a retried seed is still the seed
        earlier = list(Trial.objects.filter(study=study, trial_id=proposal.trial_id)
                       .values_list("seeded_from_id", "preempted", "resume").order_by("-attempt"))
        attempts = len(earlier)
        seeded_from_id = earlier[0][0] if earlier else seeded_from_id
        if earlier and earlier[0][2]:
            # A preempted attempt (or a retry of one, lost or handed back since): go on from its epoch.
            resume = earlier[0][2]
    now = timezone.now()
    # Timed up to this INSERT, so it costs no query of its own; the INSERT, the study's
    # UPDATE and the commit that follow (a few ms) are not counted.
    claim_ms = None if claim_started is None else (perf_counter() - claim_started) * 1000
    row = Trial.objects.create(
        study=study, trial_id=proposal.trial_id, number=started + 1, attempt=attempts + 1,
        status=TrialStatus.RUNNING, hyperparameters=proposal.values, kt_state=proposal.state,
        oracle_version=study.oracle_version + 1, tuner_id=claimant.tuner_id, worker_host=claimant.worker_host,
        worker_name=claimant.worker_name, started=now, heartbeat=now, seeded_from_id=seeded_from_id,
        claim_ms=claim_ms, resume=resume,
    )
    if resume:
        trial_epochs_carry(trial=row, resume=resume)
    return row


def _save_oracle(study: Study, oracles: Oracles, oracle) -> None:
    """The oracle's state as the next version (rows changed in this transaction carry it),
    with the slot counters changed in the same step: one UPDATE of the study row."""
    study.oracle_state = oracles.state(oracle)
    _keep_oracle_on_commit(study, oracles, oracle, study.oracle_version + 1)
    study.oracle_version += 1
    study.last_activity = timezone.now()
    study.save(update_fields=["oracle_state", "oracle_version", "last_activity", "wakeups_pending",
                              "wakeup_resends", "seeds_used", "queue_wait"])


def _next_seed(study: Study) -> dict | None:
    return study.seeds[study.seeds_used] if study.seeds_used < len(study.seeds) else None


def _claim_locked(study: Study, oracles: Oracles, oracle, claimant: Claimant, counts: _Counts,
                  claim_started: float | None = None) -> Claim:
    # Warm-start seeds go before the tuner's proposals: the tuner registers each as if it had
    # proposed it (a retry waiting in the tuner still goes first and leaves the seed for later).
    seed = _next_seed(study)
    try:
        proposal = oracles.propose(study, oracle, claimant.tuner_id,
                                   seed=None if seed is None else seed["hyperparameters"])
    except TunerUnavailable as exc:
        study_move(study, StudyStatus.FAILED, finished=timezone.now(), message=str(exc))
        notify_study_ended(study=study)
        return Claim("stopped")
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
    study.queue_wait = ""
    return Claim("running", trial=row, values=dict(proposal.values))


def claim_trial(*, study_id: int, claimant: Claimant, oracles: Oracles) -> Claim:
    """A wake-up arrived: its queue's free slot goes to the study or job fair share orders first (this
    study; another whose trial the worker then trains; a queued job it then runs, Claim("job")), if that
    one has work to give."""
    started = perf_counter()  # before the lock: waiting for it is part of a claim's latency
    route = slot_route(study_id=study_id)
    if route.job is not None:
        kind, pk = route.job
        row = job_claim_own(kind=JOB_KINDS[kind], pk=pk, worker_host=claimant.worker_host, own_message=False)
        if row is not None:
            _pass_on(route)
            return Claim("job", job=row)
    elif route.target is None:
        slot_wait(route)
        return Claim("waiting")
    elif route.redirected:
        claim = _claim(route.target, claimant, oracles, started, wakeup=False, route=route)
        if claim.status == "running":
            _pass_on(route)
            return claim
    if route.target != study_id and not route.fallback:
        slot_wait(route)
        return Claim("waiting")
    return _claim(study_id, claimant, oracles, started, wakeup=True, route=route)


def claim_offered_trial(*, study_id: int, claimant: Claimant, oracles: Oracles, kind: JobKind, pk: int) -> Claim:
    """A message for the job `pk` of `kind` offered its slot to this study, first in line
    (services/jobs.StudyTurn): a trial claimed without spending a wake-up of the study, and the job
    gets a message of its own; nothing changes when the study has no trial to give."""
    started = perf_counter()
    try:
        claim = _claim(study_id, claimant, oracles, started, wakeup=False, route=Route(study_id, study_id))
    except Study.DoesNotExist:
        return Claim("stopped")  # deleted since the route was read
    if claim.status == "running":
        job_send_again(kind=kind, pk=pk)
    return claim


def _pass_on(route: Route) -> None:
    try:
        slot_pass_on(route)
    except DatabaseError:
        # The claim has committed: never claim again on a retry. The reaper sends the wake-up the
        # study then lacks.
        log.warning("study %s: its wake-up was not passed on", route.asking, exc_info=True)


def _claim(study_id: int, claimant: Claimant, oracles: Oracles, started: float, *, wakeup: bool,
           route: Route) -> Claim:
    """Claim under the study's lock, spending one of its wake-ups; without `wakeup` (a slot another
    study's wake-up offered) nothing changes unless a trial is claimed."""
    with transaction.atomic():
        study = study_locked(study_id)
        if study.status == StudyStatus.RUNNING and route.may_hold_quota(study.team_id) \
                and (held := team_quota_locked(study)):
            if wakeup:
                slot_hold(study, held)
            return Claim("waiting")
        arrived = wakeup and study.wakeups_pending > 0
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
        if not wakeup and claim.status == "idle":
            transaction.set_rollback(True)  # as if never asked (no poll of its own): its wake-ups still come
            return claim
        if claim.status == "running" or told.count:
            _save_oracle(study, oracles, oracle)
        elif arrived:
            study.save(update_fields=["wakeups_pending"])
        return claim


def _finish_row(trial: Trial, study: Study, status: str, kt_state: dict, outcome: Outcome, **fields) -> None:
    now = timezone.now()
    trial.status, trial.kt_state, trial.finished = status, kt_state, now
    trial.oracle_version = study.oracle_version + 1  # the version _save_oracle is about to write
    trial.duration_seconds = outcome.duration_seconds or (now - trial.started).total_seconds()
    for name, value in fields.items():
        setattr(trial, name, value)
    trial.device_kind, devices = devices_held(trial.compute, study.queue)
    trial.device_seconds = trial.duration_seconds * devices
    trial.save(update_fields=["status", "kt_state", "finished", "oracle_version", "duration_seconds", "device_kind",
                              "device_seconds", *fields])


def devices_held(compute: dict, queue: str) -> tuple[str, int]:
    """The kind and number of devices a run held: from its compute record, else (it failed before
    it was placed) one device of its queue's kind."""
    return compute.get("device_kind") or queue, len(compute.get("device_names") or []) or 1


RELEASED_REASON = "Stopped before it finished (the study was cancelled or its worker shut down); it runs again."
STOPPED_EARLY_REASON = ("Stopped before it finished: the study's stopping rule was met and the study ended "
                        "(its epochs so far are kept).")


def tuner_objectives(study: Study, metrics: dict, *, pruned: bool, epochs_trained: int | None) -> dict:
    """The other objectives' values the tuner is told. A pruned trial's device-seconds are what training it in full
    would have cost (its per-epoch cost × the epochs it would have run): cut short, it would look cheap, and a tuner
    trading accuracy against cost would learn that what gets pruned is what costs little."""
    told = {row["metric"]: metrics.get(row["metric"]) for row in study.extra_objectives}
    spent = told.get("device_seconds")
    if pruned and spent is not None and epochs_trained:
        told["device_seconds"] = spent * study.epochs * study.executions_per_trial / epochs_trained
    return told


def _record(study: Study, row: Trial, outcome: Outcome, oracles: Oracles, oracle) -> bool:
    """Write the outcome to the oracle and the row; True when the failure limit was reached."""
    running_study = study.status == StudyStatus.RUNNING
    if outcome.status in RESULTS:
        # Always kept, even when the study was cancelled meanwhile: a result is never thrown away.
        # A pruned trial reaches the tuner as a completed one whose score is its best value
        # before it was stopped (the value the pruner judged, scored like a completed trial's
        # best epoch): the Bayesian tuner's Gaussian process learns that the region is poor.
        # The other objectives' values and the constraints' violations (> 0: broken) reach the
        # tuner too: Optuna's samplers search for the front and avoid infeasible regions.
        found = violations(outcome.metrics, study.constraints)
        ended = oracles.complete(oracle, row.trial_id, objective=study.objective_metric, score=outcome.score,
                                 best_step=outcome.best_step, violations=found,
                                 extra=tuner_objectives(study, outcome.metrics, pruned=outcome.status == "pruned",
                                                        epochs_trained=outcome.epochs_trained))
        status = TrialStatus.PRUNED if outcome.status == "pruned" else TrialStatus.COMPLETED
        _finish_row(row, study, status, ended.state, outcome, score=outcome.score,
                    feasible=all(v <= 0 for v in found) if study.constraints else None,
                    best_epoch=None if outcome.best_step is None else outcome.best_step + 1,
                    metrics=outcome.metrics, checkpoint_id=outcome.checkpoint_id, compute=outcome.compute,
                    environment=outcome.environment, epochs_trained=outcome.epochs_trained, pruning=outcome.pruning)
        trial_keep_as_reference(study, row, completed=status == TrialStatus.COMPLETED)
        trial_finished.send(sender=Trial, trial_pk=row.pk, study_id=study.id)  # new_candidate recipes
    elif outcome.status == "failed":
        ended = oracles.fail(oracle, row.trial_id, error=outcome.error, lost=False)
        _finish_row(row, study, TrialStatus.FAILED, ended.state, outcome, error=outcome.error or "The trial failed.",
                    environment=outcome.environment)
    if row.resume and (outcome.status != "released" or outcome.resume):
        # Ended for good, or preempted again with newer weights kept: those it went on from are not needed.
        trial_resume_forget(trial=row)
    if outcome.status == "released":  # no penalty: it runs again (now, or when resumed) unless it stopped early
        ended = oracles.release(oracle, row.trial_id)
        _finish_row(row, study, TrialStatus.CANCELLED, ended.state, outcome,
                    error=STOPPED_EARLY_REASON if study.stopped_early else outcome.error or RELEASED_REASON,
                    **({"resume": outcome.resume} if outcome.resume else {}))
    return running_study and ended.failure_limit_reached


def finish_trial(*, trial_pk: int, outcome: Outcome, oracles: Oracles,
                 next_claimant: Claimant | None = None, study_id: int | None = None) -> Finish:
    """Record a trial's outcome and keep the study's slots filled: with `next_claimant` the
    finisher claims the next trial under the same lock (no second oracle load, no trip through
    the broker); free slots get wake-ups."""
    with transaction.atomic():
        if study_id is None:
            study_id = Trial.objects.values_list("study_id", flat=True).get(pk=trial_pk)
        study = study_locked(study_id)
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
        # A spent trial budget ends the study the ordinary way (_complete_if_done), not as stopped early.
        spent = bool(oracles.done(oracle) and not counts.running)
        if failure_limit:
            _fail_after_failures(study)
        elif study.status == StudyStatus.RUNNING and not (not spent and _stop_for_device_hours(study)) \
                and not _stop_early(study, outcome, budget_spent=spent):
            finish = _fill_slots(study, oracles, oracle, next_claimant, counts)
        _save_oracle(study, oracles, oracle)
        return finish


def _fill_slots(study: Study, oracles: Oracles, oracle, next_claimant: Claimant | None, counts: _Counts) -> Finish:
    running = counts.running
    if _complete_if_done(study, oracles.done(oracle), running):
        return Finish()
    claim = None
    route = slot_route(study_id=study.id) if next_claimant is not None else None
    # The slot its trial freed stays with the study only while fair share orders it first; otherwise
    # the worker hands it back and the next wake-up it takes goes where fair share says.
    if route is not None and route.target == study.id and running < study.parallelism \
            and not (route.may_hold_quota(study.team_id) and team_quota_locked(study)):
        claim = _claim_locked(study, oracles, oracle, next_claimant, counts)
        if claim.status == "running":
            running += 1
        else:
            return Finish(claim)  # the tuner waits for running trials: their finishes refill
    study_wake(study, study.parallelism - running - study.wakeups_pending)
    return Finish(claim)


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
