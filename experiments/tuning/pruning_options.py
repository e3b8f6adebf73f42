"""A study's pruning settings as the web sees them (choices, defaults, rules), without TensorFlow; pruners.py
decides with them."""

import math
from dataclasses import asdict, dataclass, fields

from experiments.tuning.tuners import HYPERBAND_TUNERS

PRUNERS = {
    "none": "None",
    "median": "Median",
    "percentile": "Percentile",
    "successive_halving": "Successive halving (asynchronous, ASHA)",
    "pareto": "Pareto successive halving (several objectives, MO-ASHA)",
}
# Pruners that judge at rungs (epochs min_epochs × r^k) rather than at every epoch after a warm-up.
RUNG_PRUNERS = ("successive_halving", "pareto")
EXPLAINED = {
    "none": "Every trial trains all its epochs (early stopping on patience still applies).",
    "median": "Stops a trial whose best value so far is worse than the median of the finished trials' at the "
              "same epoch.",
    "percentile": "Stops a trial that is not within the best P % of the finished trials at the same epoch.",
    "successive_halving": "At epochs m, m·r, m·r², … only trials within the best 1/r of those that reached that "
                          "epoch go on.",
    "pareto": "For several objectives: at epochs m, m·r, m·r², … a trial goes on while no trial at that epoch "
              "dominates it, or while it is within the best 1/r by Pareto front and crowding. It watches the epoch's "
              "metrics and params (known before the first epoch); latency_ms, device_seconds and seconds_per_epoch "
              "are measured when training ends, so it leaves them out. Constraints on watched metrics count.",
}
# Which settings each pruner reads; the form shows only these, the others keep their defaults.
APPLIES = {
    "none": (),
    "median": ("startup_trials", "warmup_epochs", "min_trials"),
    "percentile": ("startup_trials", "warmup_epochs", "min_trials", "percentile"),
    # ASHA's first rung (min epochs) is its warm-up.
    "successive_halving": ("startup_trials", "min_trials", "min_epochs", "reduction_factor"),
    "pareto": ("startup_trials", "min_trials", "min_epochs", "reduction_factor"),
}
# (lowest, highest) of the whole-number settings.
LIMITS = {"startup_trials": (0, 10000), "warmup_epochs": (0, 1000), "min_trials": (1, 10000),
          "min_epochs": (1, 1000), "reduction_factor": (2, 100)}


@dataclass(frozen=True)
class PruningSettings:
    pruner: str = "none"
    startup_trials: int = 5  # no trial is pruned before this many trials completed
    warmup_epochs: int = 1  # nor before it trained more epochs than this
    min_trials: int = 1  # nor when fewer finished trials than this reached the same epoch
    percentile: float = 25.0  # "percentile": the share of trials kept at each epoch
    min_epochs: int = 1  # ASHA: the first rung (its minimum resource)
    reduction_factor: int = 3  # ASHA: rungs at min_epochs × r^k keep the best 1/r

    @property
    def enabled(self) -> bool:
        return self.pruner != "none"

    @classmethod
    def from_study(cls, study) -> "PruningSettings":
        return cls(**{name: getattr(study, model_field(name)) for name in SETTINGS})

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def for_pruner(cls, pruner: str, **given) -> "PruningSettings":
        """`pruner` with its own defaults (defaults_for) where `given` is silent."""
        return cls(**{**defaults_for(pruner), **given})


SETTINGS = tuple(f.name for f in fields(PruningSettings))
DEFAULTS = PruningSettings().as_dict()
# The rung pruners start judging at once, as Optuna's successive halving does (bootstrap_count 0): a rung keeps
# the best 1/r of the few trials it has, and five startup trials trained in full cost more than they protect
# (benchmarks/search_cost: epochs to the pool's best, ASHA 0.86 -> 0.55 of no pruning on the real family; to 98 %
# of the hypervolume, Pareto 0.81 -> 0.72; no target missed more often). Median and percentile keep Optuna's 5.
PRUNER_DEFAULTS = {pruner: {**DEFAULTS, "pruner": pruner, "startup_trials": 0} for pruner in RUNG_PRUNERS}


def defaults_for(pruner: str | None) -> dict:
    """The settings a study of `pruner` gets for those it does not give."""
    return dict(PRUNER_DEFAULTS.get(pruner or "none", {**DEFAULTS, "pruner": pruner or "none"}))


def model_field(name: str) -> str:
    """The Study column of a setting: `pruner`, `pruning_<name>` for the rest."""
    return name if name == "pruner" else f"pruning_{name}"


MODEL_FIELDS = tuple(model_field(name) for name in SETTINGS)


def pruning_errors(*, tuner: str | None = None, epochs=None, **values) -> dict[str, str]:
    """{Study field: message} for every rule the settings break; empty when they all hold.
    `values` are keyed by Study field (pruner, pruning_warmup_epochs, ...); absent ones are
    the defaults."""
    defaults = defaults_for(values.get("pruner"))
    given = {name: values.get(model_field(name), defaults[name]) for name in SETTINGS}
    errors = {}
    pruner = given["pruner"]
    if pruner not in PRUNERS:
        errors["pruner"] = f"Choose one of: {', '.join(PRUNERS)}."
    elif pruner != "none" and tuner in HYPERBAND_TUNERS:
        errors["pruner"] = ("Hyperband already stops weak trials early (successive halving inside its brackets): "
                            "choose no pruner, or another tuner.")
    for name, (low, high) in LIMITS.items():
        value = given[name]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            errors[model_field(name)] = f"Must be a whole number from {low:,} to {high:,}."
    value = given["percentile"]
    if (isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
            or not 0 < value < 100):
        errors[model_field("percentile")] = ("Must be a number above 0 and below 100: the share of trials kept "
                                             "at each epoch (25 keeps the best quarter).")
    if pruner in APPLIES and pruner != "none" and "pruner" not in errors and _whole(epochs):
        errors.update(_epoch_rules(given, epochs, errors))
    return errors


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _epoch_rules(given: dict, epochs: int, errors: dict) -> dict[str, str]:
    """A trial is judged at the end of an epoch, never after its last one (that saves nothing):
    the settings must leave an epoch to judge at."""
    found = {}
    if epochs < 2:
        return {"pruner": "Pruning stops a trial between epochs: it needs at least 2 epochs per trial."}
    warmup, first_rung = model_field("warmup_epochs"), model_field("min_epochs")
    if "warmup_epochs" in APPLIES[given["pruner"]] and warmup not in errors and given["warmup_epochs"] >= epochs - 1:
        found[warmup] = (f"With {epochs} epochs per trial the warm-up must be below {epochs - 1}: a trial is judged "
                         "after the epochs past the warm-up, never after its last.")
    if "min_epochs" in APPLIES[given["pruner"]] and first_rung not in errors and given["min_epochs"] >= epochs:
        found[first_rung] = (f"The first rung must come before the last epoch: with {epochs} epochs per trial, "
                             f"min epochs must be below {epochs}.")
    return found


def describe(settings: PruningSettings) -> str:
    """One line for the study page."""
    if not settings.enabled:
        return "none"
    if settings.pruner in RUNG_PRUNERS:
        kind = "Pareto successive halving (MO-ASHA)" if settings.pruner == "pareto" else "successive halving (ASHA)"
        rule = (f"{kind}: rungs at epochs {settings.min_epochs} × {settings.reduction_factor}^k "
                f"keep the best 1/{settings.reduction_factor}"
                + (" and every trial no other dominates" if settings.pruner == "pareto" else ""))
    elif settings.pruner == "percentile":
        rule = (f"percentile: keeps the best {settings.percentile:g} % at each epoch, "
                f"after a warm-up of {settings.warmup_epochs} epoch{'s' if settings.warmup_epochs != 1 else ''}")
    else:
        rule = (f"median, after a warm-up of {settings.warmup_epochs} "
                f"epoch{'s' if settings.warmup_epochs != 1 else ''}")
    start = (f"from {settings.startup_trials} completed trial{'s' if settings.startup_trials != 1 else ''} on"
             if settings.startup_trials else "from the first trials on")
    return (f"{rule}; {start}, when at least {settings.min_trials} finished "
            f"trial{'s' if settings.min_trials != 1 else ''} reached the epoch")
