"""What each figure on the pages is, in one place (a model's validation figure, trial names, warnings for results a
limit decided), as pure functions over rows so pages and API agree."""

from dataclasses import dataclass

from experiments.tuning.objectives import COST_METRICS

# workers/ensembles/build.py (_Member.key) weighs a retrained member by its trial's search-phase
# checkpoint (it never saw the validation split); promoted models and trials by themselves.
RETRAIN, PROMOTE, DETECT, RECORDED = "retrain", "promote", "detect", "recorded"
ENSEMBLE = "ensemble"
DOMINANT_WEIGHT = 0.99


@dataclass(frozen=True)
class Source:
    key: str
    short: str  # beside a figure
    long: str  # in notes and the model card


SOURCES = {s.key: s for s in (
    Source("search_checkpoint", "search-phase checkpoint",
           "the search trial's best-epoch checkpoint, trained on train, validated on validation"),
    Source("trial_checkpoint", "the trial's checkpoint",
           "the trial's best-epoch checkpoint, trained on train, evaluated on validation"),
    Source("members_blend", "members' blend",
           "the weighted blend of its members' validation predictions, each from a model trained on train only"),
)}


def _get(item, name: str):
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def validation_source(model) -> Source:
    """Where a trained model's validation figure comes from (a TrainedModel or a dict of its fields)."""
    method = _get(model, "method")
    if _get(model, "kind") == ENSEMBLE or method not in (RETRAIN, PROMOTE):
        return SOURCES["members_blend"]
    return SOURCES["trial_checkpoint" if method == PROMOTE else "search_checkpoint"]


def checkpoint_metrics(trial_metrics: dict | None) -> dict:
    """A trial's validation figures at its best epoch (its checkpoint), without the val_ prefix."""
    return {k.removeprefix("val_"): v for k, v in (trial_metrics or {}).items() if k.startswith("val_")}


def training_metrics(trial_metrics: dict | None) -> dict:
    """A trial's training-split figures at its best epoch: neither validation nor what it cost."""
    return {k: v for k, v in (trial_metrics or {}).items() if not k.startswith("val_") and k not in COST_METRICS}


def cost_figures(trial_metrics: dict | None) -> dict:
    """What a trial cost to train and serve (tuning/objectives.py's COST_METRICS it recorded), as the
    trial page prints them: thousands separated, at most 4 decimals, no trailing zeros."""
    metrics = trial_metrics or {}
    return {name: f"{metrics[name]:,.4f}".rstrip("0").rstrip(".") for name in COST_METRICS
            if isinstance(metrics.get(name), int | float)}


@dataclass(frozen=True)
class Validation:
    """The one validation figure of a model or trial: the same number under the same label on
    every page (models list, model page, leaderboard, dashboard, ensemble picker and report,
    model card), and the figure an ensemble's weights are fitted on for it."""

    metrics: dict
    source: Source


def _trial_metrics(model) -> dict | None:
    if isinstance(model, dict):
        return model.get("trial__metrics")
    return model.trial.metrics if getattr(model, "trial_id", None) else None


def model_validation(model) -> Validation:
    """A model's one validation figure: a retrained model shows its search trial's checkpoint figure, since it trained
    on validation, and so does an ensemble of it."""
    source = validation_source(model)
    if source.key == "search_checkpoint":
        return Validation(checkpoint_metrics(_trial_metrics(model)), source)
    return Validation(dict(_get(model, "val_metrics") or {}), source)


def validation(candidate) -> Validation:
    """model_validation for a trained model; a trial's own checkpoint figure for a trial."""
    if hasattr(candidate, "method"):
        return model_validation(candidate)
    return Validation(checkpoint_metrics(candidate.metrics), SOURCES["search_checkpoint"])


def member_validation(member) -> Validation:
    """An ensemble member's figure: its model's or trial's one validation figure."""
    return validation(member.model if member.model_id else member.trial)


# --- names -------------------------------------------------------------------------------


def trial_label(number: int | None) -> str:
    """Trials are named by their start order, 1-based, as the study's history chart counts them."""
    return f"trial {number}" if number else "trial"


def seed_label(*, number: int | None, study_name: str) -> str:
    """A warm-start seed's source: "Trial 3 of baseline"."""
    return f"{trial_label(number).capitalize()} of {study_name}"


def member_label(member) -> str:
    if member.model_id:
        return str(member.model)
    return f"{member.trial.study.name} {trial_label(member.trial.number)}"


def candidate_label(candidate: dict) -> str:
    """A recipe run's member as runs name it: its trial, stable across runs (a retrain's model
    version is not)."""
    return f"{candidate['study_name']} trial {candidate['trial_number']}"


# --- warnings ----------------------------------------------------------------------------

STILL_IMPROVING = "Still improving at the last epoch: more epochs may help."
CAP_REACHED = "The best epoch was the cap ({cap}): the model was still improving when detection stopped; raise it."


def trial_still_improving(*, best_epoch: int | None, epochs: int) -> bool:
    """Its best epoch was the study's last: the epoch limit, not the data, ended it."""
    return best_epoch is not None and best_epoch >= epochs


def study_still_improving(*, completed: int, at_last_epoch: int, epochs: int) -> str | None:
    """A warning when most or all completed trials had their best epoch at the last one."""
    if completed == 0 or 2 * at_last_epoch <= completed:
        return None
    if completed == 1:
        return (f"The only completed trial had its best epoch at the last epoch ({epochs}): it was still "
                "improving. More epochs may help.")
    share = "All" if at_last_epoch == completed else f"{at_last_epoch} of"
    return (f"{share} {completed} completed trials had their best epoch at the "
            f"last epoch ({epochs}): they were still improving. More epochs may help.")


def retrain_hit_cap(model) -> bool:
    best = _get(model, "best_epoch")
    return (_get(model, "method") == RETRAIN and _get(model, "epoch_source") == DETECT and best is not None
            and best >= (_get(model, "epoch_cap") or 0))


def dominant_member(weights: list | None) -> int | None:
    """The position of the member that carries at least 99% of an ensemble's weight, if one does."""
    weights = [w for w in (weights or []) if isinstance(w, int | float)]
    if len(weights) < 2 or sum(weights) <= 0:
        return None
    top = max(range(len(weights)), key=lambda i: weights[i])
    return top if weights[top] / sum(weights) >= DOMINANT_WEIGHT else None


def single_member_warning(label: str) -> str:
    return f"Effectively a single model: {label} carries at least 99% of the weight."


def model_warnings(model, *, study_epochs: int | None = None, trial_best_epoch: int | None = None,
                   dominant_label: str | None = None) -> list[str]:
    """Every limit that decided this model's result, as sentences for its page."""
    warnings = []
    if retrain_hit_cap(model):
        warnings.append(CAP_REACHED.format(cap=_get(model, "epoch_cap")))
    elif (_get(model, "method") == RETRAIN and _get(model, "epoch_source") == RECORDED and study_epochs
          and trial_still_improving(best_epoch=trial_best_epoch, epochs=study_epochs)):
        warnings.append("The trial's recorded best epoch was its last: it was still improving; detecting the "
                        "best epoch with a higher cap may find a later one.")
    if dominant_label:
        warnings.append(single_member_warning(dominant_label))
    return warnings
