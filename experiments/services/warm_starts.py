"""Warm starts: earlier studies' best configurations, fitted to a new study's space, become its seeds, which the
claim hands the tuner as its own proposals so it learns from them."""

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from experiments.errors import TuneboardError
from experiments.models import Study, Team
from experiments.presentation import figures
from experiments.selectors.trials import study_top_trials
from experiments.tuning.space_values import ConfigurationError, fit_configuration

DEFAULT_TOP_K = 3
MAX_TOP_K = 20


class WarmStartError(TuneboardError, ValueError):
    def __init__(self, messages: list[str]):
        self.messages = messages
        super().__init__(" ".join(messages))


@dataclass
class WarmStart:
    # {"hyperparameters", "trial" (the source trial's pk), "study", "label", "defaults", "dropped"}
    seeds: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what a person should know but need not fix


def warm_start_seeds(*, team: Team, studies: Iterable[Study], top_k: int, search_space: list[dict],
                     hypermodel: str) -> WarmStart:
    """The top `top_k` completed trials of each study fitted to `search_space`, repeats once; WarmStartError names
    everything that does not fit, nothing half-applied."""
    if not 1 <= top_k <= MAX_TOP_K:
        raise WarmStartError([f"Take from 1 to {MAX_TOP_K} configurations per study, not {top_k}."])
    warm, problems, unknown = WarmStart(), [], False
    seen: dict[str, str] = {}
    for study in studies:
        if study.team_id != team.id:
            raise WarmStartError(["A study to seed from does not belong to your team."])
        top = study_top_trials(study=study, n=top_k)
        if not top:
            warm.notes.append(f"{study.name} has no completed trials yet: nothing to seed from it.")
        for trial in top:
            label = figures.seed_label(number=trial.number, study_name=study.name)
            try:
                fitted = fit_configuration(search_space, trial.hyperparameters)
            except ConfigurationError as exc:
                problems += [f"{label}: {problem}" for problem in exc.problems]
                unknown = unknown or any("is not a hyperparameter" in p for p in exc.problems)
                continue
            key = json.dumps(fitted.values, sort_keys=True)
            if key in seen:
                warm.notes.append(f"{label} has the same configuration as {seen[key]}; it runs once.")
                continue
            seen[key] = label
            warm.seeds.append({"hyperparameters": fitted.values, "trial": trial.pk, "study": study.pk,
                               "label": label, "defaults": fitted.defaults, "dropped": fitted.dropped})
            if fitted.defaults:
                warm.notes.append(f"{label} has no value for {', '.join(fitted.defaults)}: "
                                  "it takes the search space's default.")
    if problems:
        if unknown:
            problems.append(f"A seed can only set hyperparameters the {hypermodel} hypermodel's search space has: "
                            "seed from studies of a similar hypermodel, or add those hyperparameters to the space.")
        raise WarmStartError(problems)
    return warm


def seed_count_error(*, seeds: int, max_trials: int | None) -> str | None:
    """Seeds are trials of the study: they count towards max trials."""
    if max_trials is not None and seeds > max_trials:
        return (f"The warm start brings {seeds} configurations, more than max trials ({max_trials}); seeds count "
                "towards max trials: raise max trials or take fewer per study.")
    return None
