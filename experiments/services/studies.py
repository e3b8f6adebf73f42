"""Studies: create, start, resume, cancel, change budgets, and the wake-ups that fill a running study's slots;
services/trial_claims.py and trial_reaper.py build on it."""

from collections.abc import Iterable

from django.db import transaction
from django.db.models import Count, F, Sum
from django.db.models.functions import Greatest
from django.utils import timezone

from experiments.errors import TuneboardError
from experiments.models import Dataset, Study, Team, Trial
from experiments.services.audit import audit_record
from experiments.services.queueing import trial_tasks_enqueue
from experiments.services.warm_starts import DEFAULT_TOP_K, WarmStartError, seed_count_error, warm_start_seeds
from experiments.states import STUDY_MOVES, StudyStatus
from experiments.tuning.bounds import MAX_SEED
from experiments.tuning.compute_options import BACKENDS, compute_errors
from experiments.tuning.hypermodel_catalog import BUILTIN, backend_mismatch, hypermodels_for_kind
from experiments.tuning.objectives import ObjectiveError, objective_errors, parse_constraints, parse_objectives
from experiments.tuning.pruning_options import MODEL_FIELDS as PRUNING_FIELDS
from experiments.tuning.pruning_options import defaults_for as pruner_defaults
from experiments.tuning.pruning_options import model_field as pruning_field
from experiments.tuning.pruning_options import pruning_errors
from experiments.tuning.search_space import validate_search_space
from experiments.tuning.space_values import grid_size
from experiments.tuning.stopping_rules import MODEL_FIELDS as STOPPING_FIELDS
from experiments.tuning.stopping_rules import PREFIX as STOPPED_EARLY
from experiments.tuning.stopping_rules import StoppingRules, budget_reason, stopping_errors
from experiments.tuning.tuners import GUIDED_TUNERS, HYPERBAND_TUNERS

# The study's numeric settings: (lowest, highest) allowed. The form shows them; this enforces them.
LIMITS = {"max_trials": (1, 10000), "executions_per_trial": (1, 10), "epochs": (1, 1000),
          "batch_size": (1, 65536), "patience": (1, 1000), "parallelism": (1, 64),
          "initial_random_trials": (1, 10000), "max_retries_per_trial": (0, 10),
          "max_consecutive_failed_trials": (1, 1000), "seed": (0, MAX_SEED)}
HYPERBAND_MIN_EPOCHS = 3
COMPUTE_DEFAULTS = {"queue": "cpu", "backend": "tensorflow", "precision": "float32", "jit_compile": "auto",
                    "steps_per_execution": 1, "devices_per_trial": 1}
COMPUTE_FIELDS = tuple(COMPUTE_DEFAULTS)


# oracle_state's key after an extension (services/study_extensions.py): the part of the tuner's state every
# KerasTuner oracle keeps, which the worker's rebuild lays over the new tuner's own (workers/tuners/oracle.py).
EXTENDED = "tuneboard_extended"


class StudyError(TuneboardError, ValueError):
    pass


def study_move(study: Study, target: str, **fields) -> None:
    if target not in STUDY_MOVES[study.status]:
        raise StudyError(f"A {study.get_status_display().lower()} study cannot become {target}.")
    study.status = target
    for name, value in fields.items():
        setattr(study, name, value)
    study.save(update_fields=["status", *fields])


def study_locked(study_id: int) -> Study:
    return Study.objects.select_for_update().get(pk=study_id)


def study_wake(study: Study, count: int, *, countdown: float | None = None) -> None:
    """Send `count` wake-ups once the transaction commits; the caller holds the study's lock."""
    if count <= 0:
        return
    study.wakeups_pending += count
    study.last_wakeup = timezone.now()
    study.save(update_fields=["wakeups_pending", "last_wakeup", "wakeup_resends"])
    trial_tasks_enqueue(study_id=study.id, queue=study.task_queue, count=count, countdown=countdown,
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


def study_device_budget_spent(study: Study) -> str | None:
    """Why the study's device-hour budget is spent, or None (no budget, or some of it left): its
    ended trials' device time, failed and lost ones included (they held their devices too)."""
    if study.stop_device_hours is None:
        return None
    used = Trial.objects.filter(study=study, device_seconds__isnull=False).aggregate(
        seconds=Sum("device_seconds"), trials=Count("id"))
    return budget_reason(StoppingRules.from_study(study), device_seconds=used["seconds"] or 0.0,
                         trials=used["trials"])


def study_start(*, study: Study) -> Study:
    """Start a new study, or resume a cancelled or failed one where it left off. Failures
    before this start no longer count towards max_consecutive_failed_trials."""
    with transaction.atomic():
        study = study_locked(study.pk)
        if not study.can_start:
            raise StudyError(f"The study is {study.get_status_display().lower()}; it cannot be started now.")
        study_run_locked(study)
    return study


def study_run_locked(study: Study, **fields) -> None:
    """Set a locked study running (a first start, a resume, an extension) and wake its workers; failures before
    this start no longer count towards its limit. Refused while its device-hour budget is spent."""
    if spent := study_device_budget_spent(study):
        why = spent.removeprefix(STOPPED_EARLY).strip()
        raise StudyError(f"{why[:1].upper()}{why[1:]} Raise its device-hour budget to resume it.")
    now = timezone.now()
    state = study.oracle_state or {}
    ended = state.get(EXTENDED, state).get("end_order", [])
    study_move(study, StudyStatus.RUNNING, message="", started=study.started or now, finished=None,
               last_activity=now, failures_counted_from=len(ended),
               wakeups_pending=0, wakeup_resends=0, **fields)
    study_wake(study, study.parallelism)


def study_resume(*, study: Study) -> Study:
    """study_start for a study that ran before (the API's resume refuses a first start)."""
    if study.started is None:
        raise StudyError("The study has never started; start it instead.")
    return study_start(study=study)


def study_cancel(*, study: Study) -> Study:
    """Stop the study; each running trial notices at its next epoch end and stops (a trial
    that completes meanwhile keeps its result)."""
    with transaction.atomic():
        study = study_locked(study.pk)
        if study.status != StudyStatus.RUNNING:
            raise StudyError("Only a running study can be cancelled.")
        study_move(study, StudyStatus.CANCELLED, message="Cancelled by a user.", finished=timezone.now())
        audit_record(verb="study.cancel", obj=study, team_id=study.team_id)
    return study


def study_settings_errors(*, search_space: list | None = None, **options) -> dict[str, str]:
    """Every rule a study's settings must meet, as {field: message}; empty when all hold."""
    errors = {}
    for name, (low, high) in LIMITS.items():
        value = options.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            errors[name] = f"Must be a whole number from {low:,} to {high:,}."
    if options.get("priority") not in (None, *Study.Priority.values):
        errors["priority"] = "Must be high, normal or low."
    tuner = options.get("tuner")
    if tuner == Study.Tuner.GRID and search_space and grid_size(search_space) is None:
        errors["tuner"] = "Grid search needs a finite grid: give every Float a step, or use another tuner."
    epochs = options.get("epochs") or 0
    if tuner in HYPERBAND_TUNERS and "epochs" not in errors and epochs < HYPERBAND_MIN_EPOCHS:
        errors["epochs"] = f"Hyperband needs at least {HYPERBAND_MIN_EPOCHS} epochs to form brackets."
    if options.get("initial_random_trials") is not None and tuner not in GUIDED_TUNERS:
        errors["initial_random_trials"] = ("Initial random trials only apply to Bayesian optimisation, Optuna TPE "
                                           "and Optuna Gaussian process.")
    compute = {name: options[name] for name in COMPUTE_FIELDS if name in options}
    if compute:
        errors.update(compute_errors(**{**COMPUTE_DEFAULTS, **compute}))
    pruning = {name: options[name] for name in PRUNING_FIELDS if name in options}
    if pruning:
        errors.update(pruning_errors(tuner=tuner, epochs=options.get("epochs"), **pruning))
    stopping = {name: options[name] for name in STOPPING_FIELDS if name in options}
    if stopping:
        max_trials = options.get("max_trials", Study._meta.get_field("max_trials").default)
        errors.update(stopping_errors(max_trials=None if "max_trials" in errors else max_trials, **stopping))
    errors.update(_objectives_errors(tuner, options))
    dataset, hypermodel = options.get("dataset"), options.get("hypermodel")
    if dataset is not None and hypermodel:
        # A name this process does not know is left to the worker, which reports it on the trial.
        reason = dict((entry.name, why) for entry, why in hypermodels_for_kind(dataset.kind)).get(hypermodel)
        if reason:
            errors["hypermodel"] = f"The {hypermodel} hypermodel {reason}."
    entry = BUILTIN.get(hypermodel)
    backend = options.get("backend")
    if entry and backend in BACKENDS and "hypermodel" not in errors and (why := backend_mismatch(entry, backend)):
        errors["backend"] = f"The {hypermodel} hypermodel {why}; choose TensorFlow or another hypermodel."
    return errors


def _objectives_errors(tuner: str | None, options: dict) -> dict[str, str]:
    """Several objectives and constraints: well formed (the form parses the page's lines; other
    callers pass lists), and what they allow (experiments/tuning/objectives.py)."""
    errors, parsed = {}, {}
    for name, parse in (("extra_objectives", parse_objectives), ("constraints", parse_constraints)):
        try:
            parsed[name] = parse(options.get(name), allowed=None)
        except ObjectiveError as exc:
            errors[name] = str(exc)
    if "extra_objectives" in parsed:
        errors.update(objective_errors(tuner=tuner, objective_metric=options.get("objective_metric"),
                                       extra_objectives=parsed["extra_objectives"], pruner=options.get("pruner")))
    return errors


def _refuse(errors: dict[str, str]) -> None:
    if errors:
        raise StudyError(" ".join(f"{name.replace('_', ' ').capitalize()}: {message}"
                                  for name, message in errors.items()))


def study_create(*, team: Team, user, dataset: Dataset, name: str, hypermodel: str,
                 search_space: list, seed_from: Iterable[Study] = (), top_k: int = DEFAULT_TOP_K,
                 **options) -> Study:
    """With `seed_from`, the study warm-starts from the best `top_k` trials of each of those studies."""
    if dataset.team_id != team.id:
        raise StudyError("That dataset does not belong to your team.")
    rows = validate_search_space(search_space)
    _refuse(study_settings_errors(search_space=rows, dataset=dataset, hypermodel=hypermodel, **options))
    for field, parse in (("extra_objectives", parse_objectives), ("constraints", parse_constraints)):
        if field in options:
            options[field] = parse(options[field], allowed=None)  # as stored: plain lists of dicts
    seeds = []
    if seed_from:
        try:
            seeds = warm_start_seeds(team=team, studies=seed_from, top_k=top_k, search_space=rows,
                                     hypermodel=hypermodel).seeds
        except WarmStartError as exc:
            raise StudyError(str(exc)) from None
        max_trials = options.get("max_trials") or Study._meta.get_field("max_trials").default
        if too_many := seed_count_error(seeds=len(seeds), max_trials=max_trials):
            raise StudyError(too_many)
    if options.get("stop_min_delta") is None:
        options.pop("stop_min_delta", None)  # empty: the column's default, 0
    for setting, value in pruner_defaults(options.get("pruner")).items():
        options.setdefault(pruning_field(setting), value)  # the chosen pruner's, not the column's (startup_trials)
    return Study.objects.create(team=team, created_by=user, dataset=dataset, name=name.strip(),
                                hypermodel=hypermodel, search_space=rows, seeds=seeds, **options)


def study_update_budget(*, study: Study, max_trials: int, parallelism: int, priority: str | None = None) -> Study:
    """Max trials, parallelism and priority may change while a study runs; more parallelism wakes
    more workers at once, less lets running trials finish without successors; a priority counts
    from the next claim on."""
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        if study.status == Study.Status.COMPLETED:
            raise StudyError("This study has completed, so its budget no longer changes anything; extend it to "
                             "search further.")
        priority = priority or study.priority
        _refuse(study_settings_errors(search_space=None, max_trials=max_trials, parallelism=parallelism,
                                      priority=priority))
        started = Trial.objects.filter(study=study).order_by().values("trial_id").distinct().count()
        if max_trials < started:
            raise StudyError(f"{started} trials have already started; max trials cannot be lower than that.")
        extra = parallelism - study.parallelism
        study.max_trials, study.parallelism, study.priority = max_trials, parallelism, priority
        study.save(update_fields=["max_trials", "parallelism", "priority"])
        if study.status == Study.Status.RUNNING and extra > 0:
            study_wake(study, extra)
    return study
