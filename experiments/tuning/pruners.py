"""Whether a running trial stops at an epoch's end: pure functions of the study's settings and stored values, so
every worker decides alike (docs/design/distributed-search.md, "Pruning")."""

import math
from dataclasses import asdict, dataclass

from experiments.tuning.pruning_options import RUNG_PRUNERS, PruningSettings

# Why a trial was (not) judged: the codes of Decision.reason.
DISABLED, LAST_EPOCH, STARTUP, WARMUP, NOT_A_RUNG, NO_VALUE, TOO_FEW = (
    "disabled", "last_epoch", "startup", "warmup", "not_a_rung", "no_value", "too_few_trials")
KEPT, PRUNED = "kept", "pruned"


@dataclass(frozen=True)
class Decision:
    prune: bool
    reason: str
    pruner: str = "none"
    execution: int = 0
    epoch: int = 0  # 1-based: the number of epochs this execution has trained
    value: float | None = None  # the trial's best so far
    threshold: float | None = None  # the bar it had to meet
    compared: int = 0  # finished trials with a value at this epoch
    rung: int | None = None  # successive halving only

    def record(self) -> dict:
        """What a pruned trial keeps (Trial.pruning), JSON-safe."""
        return asdict(self)


def better(a: float, b: float, direction: str) -> bool:
    return a < b if direction == "min" else a > b


def objective_value(metrics: dict, objective: str) -> float | None:
    """The objective in one epoch's metrics, when it is a finite number."""
    value = metrics.get(objective)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def best_so_far(previous: float | None, value: float | None, direction: str) -> float | None:
    if value is None:
        return previous
    if previous is None:
        return value
    return value if better(value, previous, direction) else previous


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between closest ranks (numpy's
    default, which Optuna uses)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def rung_of(epoch: int, settings: PruningSettings) -> int | None:
    """k when `epoch` (1-based) is the rung epoch min_epochs × r^k, else None."""
    rung, at = 0, settings.min_epochs
    while at < epoch:
        rung, at = rung + 1, at * settings.reduction_factor
    return rung if at == epoch else None


def judged(settings: PruningSettings, epoch: int, *, last: bool) -> str | None:
    """None when this epoch may be judged; else the reason it is not. Needs no values, so the
    caller can skip reading other trials' rows."""
    if not settings.enabled:
        return DISABLED
    if last:  # stopping after the last epoch saves nothing
        return LAST_EPOCH
    if settings.pruner in RUNG_PRUNERS:
        return None if rung_of(epoch, settings) is not None else NOT_A_RUNG
    return WARMUP if epoch <= settings.warmup_epochs else None


def decide(*, settings: PruningSettings, direction: str, execution: int, epoch: int, value: float | None,
           others: list[float], completed: int, last: bool = False) -> Decision:
    """`value`: this trial's best so far at `epoch` (1-based) of `execution`; `others`: the
    finished trials' best so far at the same epoch and execution; `completed`: how many of
    the study's trials completed (pruned ones excluded); `last`: the epoch is the trial's last."""
    common = {"pruner": settings.pruner, "execution": execution, "epoch": epoch, "value": value,
              "compared": len(others)}
    skipped = judged(settings, epoch, last=last)
    if skipped is None and completed < settings.startup_trials:
        skipped = STARTUP
    if skipped is None and value is None:
        skipped = NO_VALUE  # no objective to judge: the trial fails or completes on its own terms
    if skipped is None and len(others) < settings.min_trials:
        skipped = TOO_FEW
    if skipped is not None:
        return Decision(False, skipped, **common)
    if settings.pruner == "successive_halving":
        rung = rung_of(epoch, settings)
        bar = _promotion_bar(value, others, settings.reduction_factor, direction)
        prune = better(bar, value, direction)
        return Decision(prune, PRUNED if prune else KEPT, threshold=bar, rung=rung, **common)
    kept = 50.0 if settings.pruner == "median" else settings.percentile
    # The best `kept` % lie below the kept-th percentile when minimising, above the (100 - kept)-th
    # when maximising.
    bar = percentile(others, kept if direction == "min" else 100 - kept)
    prune = better(bar, value, direction)
    return Decision(prune, PRUNED if prune else KEPT, threshold=bar, **common)


def _promotion_bar(value: float, others: list[float], factor: int, direction: str) -> float:
    """The worst value still within the best 1/factor of the rung (the trial itself included);
    with fewer than `factor` trials at the rung, the best one (Optuna's rule)."""
    competing = sorted([*others, value], reverse=direction == "max")
    index = max(len(competing) // factor - 1, 0)
    return competing[index]


def explain(record: dict, objective: str) -> str:
    """A pruned trial's decision, in words, for its page and the trials table."""
    if not record:
        return ""
    epoch = record.get("epoch")
    execution = record.get("execution", 0)
    where = f"epoch {epoch}" + (f" of execution {execution + 1}" if execution else "")
    value, bar, compared = record.get("value"), record.get("threshold"), record.get("compared", 0)
    trials = f"{compared} finished trial{'s' if compared != 1 else ''}"
    if record.get("pruner") == "pareto":  # threshold: how many of them dominated it (pareto_pruning.decide)
        return (f"Pruned after {where} (rung {record.get('rung')}): {int(bar or 0)} of the {trials} at that rung "
                f"dominated it on the watched objectives, and it was not in the share of the {compared + 1} trials at "
                "the rung that goes on (by Pareto front, then crowding).")
    if record.get("pruner") == "successive_halving":
        return (f"Pruned after {where} (rung {record.get('rung')}): its best {objective} so far, {value:.4g}, was "
                f"not within the best of the {compared + 1} trials at that rung (bar {bar:.4g}).")
    rule = "median" if record.get("pruner") == "median" else "bar of the kept percentile"
    return (f"Pruned after {where}: its best {objective} so far, {value:.4g}, was worse than the {rule} "
            f"({bar:.4g}) of {trials} at that epoch.")
