"""Extending a study that ended: more trials, more epochs, a larger device-hour budget or another tuner, continuing
its numbering with every trial so far told to the (new) tuner — a warm start without a clone."""

from django.db import transaction
from django.utils import timezone

from experiments.models import Study, Trial
from experiments.services.audit import audit_record
from experiments.services.studies import (
    EXTENDED,
    StudyError,
    study_device_budget_spent,
    study_locked,
    study_run_locked,
    study_settings_errors,
)
from experiments.states import StudyStatus
from experiments.tuning.pruning_options import MODEL_FIELDS as PRUNING_FIELDS
from experiments.tuning.stopping_rules import MODEL_FIELDS as STOPPING_FIELDS
from experiments.tuning.stopping_rules import PREFIX as STOPPED_EARLY
from experiments.tuning.tuners import GUIDED_TUNERS


class ExtensionRefused(StudyError):
    """A setting of the extension breaks a rule: {field: message} (bad input, not the study's state)."""

    def __init__(self, errors: dict[str, str]):
        self.errors = errors
        super().__init__(" ".join(f"{name.replace('_', ' ').capitalize()}: {message}"
                                  for name, message in errors.items()))


EXTENDABLE = (StudyStatus.COMPLETED, StudyStatus.CANCELLED, StudyStatus.FAILED)
SEGMENT_FIELDS = ("tuner", "max_trials", "epochs", "stop_device_hours")
# What every KerasTuner oracle keeps (the order trials started and ended, what was tried, the seed's place), kept
# under EXTENDED without the old tuner's own state (Hyperband's brackets, the grid's walk); the worker rebuilds the new
# tuner around it from every trial row (workers/tuners/oracle.py, load_oracle).
COMMON_STATE = ("ongoing_trials", "hyperparameters", "start_order", "end_order", "run_times", "retry_queue", "seed",
                "seed_state", "tried_so_far", "id_to_hash", "display")


def study_extend(*, study: Study, user, max_trials: int | None = None, epochs: int | None = None,
                 stop_device_hours: float | None = None, tuner: str | None = None) -> Study:
    """Run an ended study again with the changed settings (those given); refused with every reason when a setting
    breaks a rule, or when nothing more could run."""
    with transaction.atomic():
        study = study_locked(study.pk)
        if study.status not in EXTENDABLE:
            raise StudyError(f"Only a completed, cancelled or failed study can be extended; this one is "
                             f"{study.get_status_display().lower()} (a running study's max trials change on its page).")
        changed = {"max_trials": study.max_trials if max_trials is None else max_trials,
                   "epochs": study.epochs if epochs is None else epochs,
                   "tuner": tuner or study.tuner,
                   "stop_device_hours": study.stop_device_hours if stop_device_hours is None else stop_device_hours}
        if errors := _errors(study, changed):
            raise ExtensionRefused(errors)
        before = {"initial_random_trials": study.initial_random_trials,
                  **{name: getattr(study, name) for name in changed}}
        _record_segment(study, changed, user)
        state = study.oracle_state or {}
        if (changed["tuner"], changed["epochs"]) != (study.tuner, study.epochs) and EXTENDED not in state:
            # Another tuner, or Hyperband's brackets for other epochs: only what every oracle keeps goes on. The same
            # tuner for more trials or device-hours keeps its whole state (NSGA-II's generations, open brackets).
            state = {EXTENDED: {key: state[key] for key in COMMON_STATE if key in state}}
        if changed["tuner"] not in GUIDED_TUNERS:
            study.initial_random_trials = None  # a setting of the guided tuners alone
        for name, value in changed.items():
            setattr(study, name, value)
        study_run_locked(study, oracle_state=state, segments=study.segments,
                         initial_random_trials=study.initial_random_trials, **changed)
        after = {"initial_random_trials": study.initial_random_trials, **changed}
        audit_record(verb="study.extend", obj=study, team_id=study.team_id, actor=user,
                     changes={name: [before[name], value] for name, value in after.items() if before[name] != value})
    return study


def _errors(study: Study, changed: dict) -> dict[str, str]:
    started = Trial.objects.filter(study=study).order_by().values("trial_id").distinct().count()
    errors = {}
    if changed["epochs"] < study.epochs:
        errors["epochs"] = (f"Epochs can only be raised (from {study.epochs}): the trials so far trained that many, "
                            "and fewer would not compare with them.")
    if changed["max_trials"] <= started:
        errors["max_trials"] = (f"{started} trial{'s have' if started != 1 else ' has'} run: raise max trials above "
                                f"{started} to run more.")
    options = {name: getattr(study, name) for name in (*PRUNING_FIELDS, *STOPPING_FIELDS)}
    options.update(changed, objective_metric=study.objective_metric, extra_objectives=study.extra_objectives,
                   constraints=study.constraints, priority=study.priority)
    found = study_settings_errors(search_space=study.search_space, **options)
    if "pruner" in found:  # the extension cannot change the pruner: the tuner it chose is what clashes with it
        found.setdefault("tuner", f"This study prunes with {study.pruner}. {found.pop('pruner')}")
    if "stop_device_hours" not in found and (spent := _budget_spent(study, changed["stop_device_hours"])):
        found["stop_device_hours"] = f"{spent} Raise the device-hour budget to run it on."
    # The settings that were not changed broke no rule before; a message about one of them comes from the change.
    return {**{name: message for name, message in found.items() if name not in errors}, **errors}


def _budget_spent(study: Study, hours: float | None) -> str | None:
    """Why the device-hour budget the extension leaves would stop it at once, or None."""
    study.stop_device_hours, kept = hours, study.stop_device_hours
    try:
        spent = study_device_budget_spent(study)
    finally:
        study.stop_device_hours = kept
    return None if spent is None else spent.removeprefix(STOPPED_EARLY).strip()


def _record_segment(study: Study, changed: dict, user) -> None:
    if not study.segments:  # the settings it ran with so far: its first segment
        study.segments = [{"first_trial": 1, **{name: getattr(study, name) for name in SEGMENT_FIELDS},
                           "at": (study.started or study.created).isoformat(), "by": ""}]
    first = Trial.objects.filter(study=study).count() + 1  # a claim numbers its row by the rows before it
    study.segments = [*study.segments, {"first_trial": first, **changed, "at": timezone.now().isoformat(),
                                        "by": getattr(user, "username", "")}]
