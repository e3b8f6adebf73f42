"""A study's stopping rules (a target reached, or no improvement in N trials): EarlyStopping one level up, in pure
Python so the web validates with the code services/trial_claims.py asks."""

import math
from collections.abc import Iterable
from dataclasses import dataclass

MODEL_FIELDS = ("stop_target", "stop_patience", "stop_min_delta", "stop_device_hours")
LABELS = {"stop_target": "Stop at target", "stop_patience": "Stop after trials without improvement",
          "stop_min_delta": "Minimum improvement (δ)", "stop_device_hours": "Device-hour budget"}
HELP_TEXTS = {
    "stop_target": "The study ends once a trial's objective reaches this value (at least it when maximising, "
                   "at most it when minimising). Empty: no target.",
    "stop_patience": "The study ends when the best has not improved by more than δ in this many trials in a row "
                     "(completed or pruned, in trial order). Empty: never on a plateau.",
    "stop_min_delta": "An improvement of δ or less does not count (0: any improvement counts). Only with "
                      "trials without improvement.",
    "stop_device_hours": "The study ends once its finished trials have used this many device-hours (wall time × "
                         "devices held, as on the study page); running trials stop at their epoch end. Empty: no "
                         "budget in device-hours.",
}
PREFIX = "Stopped early:"
# The words for a value that is not a (finite) number: the form's fields use them too.
NOT_A_NUMBER = {"stop_target": "Must be a finite number, or empty for no target.",
                "stop_min_delta": "Must be 0 or a positive number.",
                "stop_device_hours": "Must be a positive number of device-hours up to 1,000,000, or empty for no "
                                     "budget."}
MAX_DEVICE_HOURS = 1_000_000  # 114 device-years: anything above is a typo, not a budget


@dataclass(frozen=True)
class StoppingRules:
    target: float | None = None
    patience: int | None = None
    min_delta: float = 0.0
    device_hours: float | None = None

    @property
    def enabled(self) -> bool:
        """A rule on the objective is set (the device-hour budget is checked on its own, for every trial)."""
        return self.target is not None or self.patience is not None

    @classmethod
    def from_study(cls, study) -> "StoppingRules":
        return cls(study.stop_target, study.stop_patience, study.stop_min_delta or 0.0, study.stop_device_hours)


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def stopping_errors(*, stop_target=None, stop_patience=None, stop_min_delta=None, stop_device_hours=None,
                    max_trials=None) -> dict[str, str]:
    """{Study field: message} for every rule the settings break; empty when they all hold."""
    errors = {}
    if stop_target is not None and not _number(stop_target):
        errors["stop_target"] = NOT_A_NUMBER["stop_target"]
    high = max_trials if isinstance(max_trials, int) and not isinstance(max_trials, bool) and max_trials >= 1 \
        else None
    if stop_patience is not None and (isinstance(stop_patience, bool) or not isinstance(stop_patience, int)
                                      or stop_patience < 1 or (high is not None and stop_patience > high)):
        within = f"from 1 to {high:,} (max trials)" if high is not None else "of 1 or more"
        errors["stop_patience"] = f"Must be a whole number {within}, or empty for no plateau rule."
    if stop_min_delta is not None and (not _number(stop_min_delta) or stop_min_delta < 0):
        errors["stop_min_delta"] = NOT_A_NUMBER["stop_min_delta"]
    elif stop_min_delta and stop_patience is None:
        errors["stop_min_delta"] = ("Only applies with trials without improvement: set those too, or leave the "
                                    "minimum improvement at 0.")
    if stop_device_hours is not None and (not _number(stop_device_hours)
                                          or not 0 < stop_device_hours <= MAX_DEVICE_HOURS):
        errors["stop_device_hours"] = NOT_A_NUMBER["stop_device_hours"]
    return errors


def _better(value: float, than: float, direction: str, margin: float = 0.0) -> bool:
    return value > than + margin if direction == "max" else value < than - margin


def stop_reason(rules: StoppingRules, *, results: Iterable[tuple[int, float]], direction: str,
                metric: str, since: int = 1) -> str | None:
    """Why the study should stop now, or None. `results` are (trial number, score) of the trials
    that finished with a result, in trial order; scores are the objective's own values, better
    upwards when `direction` is "max". `since`: the first trial of the study's latest segment (an
    extension): only its trials can reach the target or wait out the patience, so a study that had
    stopped on its rule runs on when extended; the earlier trials still set the bar to improve on."""
    results = [(number, score) for number, score in results if _number(score)]
    current = [(number, score) for number, score in results if number >= since]
    if not rules.enabled or not current:
        return None
    best_number, best = current[0]
    for number, score in current[1:]:
        if _better(score, best, direction):
            best_number, best = number, score
    if rules.target is not None and (best >= rules.target if direction == "max" else best <= rules.target):
        return f"{PREFIX} {metric} reached {best:.4g} (target {rules.target:.4g}) at trial {best_number}."
    if rules.patience is None:
        return None
    # As Keras's EarlyStopping: the reference moves only on an improvement by more than δ.
    reference, waited = results[0][1], 0
    for number, score in results[1:]:
        if _better(score, reference, direction, rules.min_delta):
            reference, waited = score, 0
        elif number >= since:
            waited += 1
    if waited < rules.patience:
        return None
    best_number, best = min(results, key=lambda r: r[1] if direction == "min" else -r[1])
    by = f" by more than {rules.min_delta:.4g}" if rules.min_delta else ""
    return (f"{PREFIX} no improvement over {reference:.4g}{by} in the last {rules.patience} "
            f"trial{'s' if rules.patience != 1 else ''} (best {metric} {best:.4g} at trial {best_number}).")


def budget_reason(rules: StoppingRules, *, device_seconds: float, trials: int) -> str | None:
    """Why the study should stop now for its device-hour budget, or None. `device_seconds` are
    those of its `trials` finished trials (every attempt, failed ones too: they held devices)."""
    if rules.device_hours is None or device_seconds < rules.device_hours * 3600:
        return None
    return (f"{PREFIX} its budget of {rules.device_hours:g} device-hours is spent "
            f"({device_seconds / 3600:.3g} device-hours over {trials} trial{'s' if trials != 1 else ''}).")


def describe(rules: StoppingRules, *, metric: str, direction: str) -> str:
    """One line for the study page."""
    if not rules.enabled and rules.device_hours is None:
        return "none: the study runs its whole budget"
    parts = []
    if rules.target is not None:
        parts.append(f"once {metric} {'≥' if direction == 'max' else '≤'} {rules.target:g}")
    if rules.patience is not None:
        by = f" by more than {rules.min_delta:g}" if rules.min_delta else ""
        parts.append(f"when the best has not improved{by} in {rules.patience} "
                     f"trial{'s' if rules.patience != 1 else ''}")
    if rules.device_hours is not None:
        parts.append(f"once its trials have used {rules.device_hours:g} device-hours")
    return "stop " + ", or ".join(parts)
