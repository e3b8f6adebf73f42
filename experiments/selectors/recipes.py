"""Who an ensemble recipe would pick today, every trial considered returned with its reason, so the preview and a
run's record say the same thing (docs/design/job-lifecycle.md)."""

import hashlib
from dataclasses import asdict, dataclass, field

from experiments.models import EnsembleRecipe, Study, Team, TrainedModel, Trial

MembersAs = EnsembleRecipe.MembersAs


@dataclass
class Rule:
    """A recipe's candidate rule, saved or not (the preview of a form being filled in)."""

    team: Team
    dataset_id: int
    study_ids: list[int] = field(default_factory=list)
    source_tag: str = ""
    metric: str = "val_loss"
    direction: str = "min"
    top_k: int = 3
    per_group_max: int = 1
    group_by: str = EnsembleRecipe.GroupBy.HYPERMODEL
    include_pruned: bool = False
    members_as: str = MembersAs.RETRAINED

    @classmethod
    def of(cls, recipe: EnsembleRecipe) -> "Rule":
        return cls(team=recipe.team, dataset_id=recipe.dataset_id,
                   study_ids=sorted(recipe.source_studies.values_list("id", flat=True)),
                   **{name: getattr(recipe, name) for name in (
                       "source_tag", "metric", "direction", "top_k", "per_group_max", "group_by", "include_pruned",
                       "members_as")})


@dataclass
class Candidate:
    trial_id: int
    trial_number: int
    study_id: int
    study_name: str
    hypermodel: str
    value: float | None
    pruned: bool
    model_id: int | None  # the finished model this pick uses (retrained or existing), if any
    picked: bool = False
    to_retrain: bool = False  # a retrain the run requests (members as retrained, none finished yet)
    why: str = ""

    @property
    def key(self) -> str:
        """The ensemble member this candidate becomes: a trial's checkpoint, a finished model, or a
        retrain the run requests ("retrain:<trial>")."""
        if self.model_id is not None:
            return f"model:{self.model_id}"
        return f"retrain:{self.trial_id}" if self.to_retrain else f"trial:{self.trial_id}"

    def as_dict(self) -> dict:
        return {**asdict(self), "key": self.key}


def recipe_sources(rule: Rule) -> list[Study]:
    """The studies named, and every study of the dataset tagged `source_tag`; of the team and the
    dataset only (a study named by id from elsewhere is not a source)."""
    # Tags are matched in Python: SQLite (`make run`) has no JSON `contains` lookup.
    named = set(rule.study_ids)
    return [study for study in Study.objects.filter(team=rule.team, dataset_id=rule.dataset_id).order_by("id")
            if study.id in named or (rule.source_tag and rule.source_tag in (study.tags or []))]


def _value(trial: Trial, study: Study, metric: str) -> float | None:
    value = (trial.metrics or {}).get(metric)
    if value is None and metric == study.objective_metric:
        value = trial.score
    return float(value) if isinstance(value, int | float) else None


def _finished_models(trial_ids: list[int], members_as: str) -> dict[int, int]:
    """Per trial, its newest finished single model: a retrain for `retrained`, any for `existing`."""
    rows = TrainedModel.objects.filter(trial_id__in=trial_ids, kind=TrainedModel.Kind.SINGLE,
                                       status=TrainedModel.Status.COMPLETED)
    if members_as == MembersAs.RETRAINED:
        rows = rows.filter(method=TrainedModel.Method.RETRAIN)
    found: dict[int, int] = {}
    for trial_id, model_id in rows.order_by("created", "id").values_list("trial_id", "id"):
        found[trial_id] = model_id  # the newest wins
    return found


def recipe_candidates(rule: Rule) -> list[Candidate]:
    """Best first: each source study's top K, then at most M per group across studies."""
    statuses = (Trial.Status.COMPLETED, Trial.Status.PRUNED) if rule.include_pruned else (Trial.Status.COMPLETED,)
    ranked: list[tuple[Candidate, Trial]] = []
    for study in recipe_sources(rule):
        rows = []
        for trial in Trial.objects.filter(study=study, status__in=statuses).order_by("number"):
            value = _value(trial, study, rule.metric)
            if value is not None:
                rows.append((value, trial))
        rows.sort(key=lambda pair: (pair[0] if rule.direction == "min" else -pair[0], pair[1].number))
        for value, trial in rows[:rule.top_k]:
            ranked.append((Candidate(trial_id=trial.id, trial_number=trial.number, study_id=study.id,
                                     study_name=study.name, hypermodel=study.hypermodel, value=value,
                                     pruned=trial.status == Trial.Status.PRUNED, model_id=None), trial))
    ranked.sort(key=lambda pair: (pair[0].value if rule.direction == "min" else -pair[0].value,
                                  pair[0].study_id, pair[0].trial_number))
    models = {} if rule.members_as == MembersAs.CHECKPOINT else _finished_models([t.id for _, t in ranked],
                                                                                  rule.members_as)
    per_group: dict[str, int] = {}
    for candidate, trial in ranked:
        group = candidate.hypermodel if rule.group_by == EnsembleRecipe.GroupBy.HYPERMODEL else candidate.study_name
        label = f"hypermodel {group}" if rule.group_by == EnsembleRecipe.GroupBy.HYPERMODEL else f"study {group}"
        if per_group.get(group, 0) >= rule.per_group_max:
            candidate.why = f"{label} already has {rule.per_group_max}"
            continue
        if rule.members_as == MembersAs.CHECKPOINT and trial.checkpoint_id is None:
            candidate.why = "no checkpoint kept"
            continue
        candidate.model_id = models.get(trial.id)
        if rule.members_as == MembersAs.EXISTING and candidate.model_id is None:
            candidate.why = "no finished model of this trial"
            continue
        if rule.members_as == MembersAs.RETRAINED and candidate.model_id is None:
            if trial.checkpoint_id is None and not trial.best_epoch:
                candidate.why = "no recorded result to retrain from"
                continue
            candidate.why, candidate.to_retrain = "retrained in the run", True
        else:
            candidate.why = "picked"
        candidate.picked = True
        per_group[group] = per_group.get(group, 0) + 1
    return [candidate for candidate, _ in ranked]


def candidates_fingerprint(candidates: list[Candidate]) -> str:
    """Which trials are picked, as a short hash: a new model entering the candidates changes it."""
    picked = sorted(c.trial_id for c in candidates if c.picked)
    return hashlib.sha256(",".join(map(str, picked)).encode()).hexdigest()[:16]
