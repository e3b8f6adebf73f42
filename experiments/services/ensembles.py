"""Ensembles: saved from the browser as a recipe (members, method), built on a worker into a
TrainedModel of kind ENSEMBLE with the same downloads and card as single models."""

from django.db import transaction
from django.utils.text import slugify

from experiments.models import Dataset, EnsembleMember, Team, TrainedModel, Trial
from experiments.services.job_kinds import JOB_KINDS
from experiments.services.jobs import job_send
from experiments.services.trained_models import (
    MAX_MODEL_NAME,
    ModelRequestError,
    check_model_name,
    last_version_locked,
)
from experiments.tuning.bounds import parse_id

METHODS = (TrainedModel.Method.MEAN, TrainedModel.Method.NELDER_MEAD, TrainedModel.Method.GREEDY,
           TrainedModel.Method.STACKING)
MAX_ROUNDS = 1000


class EnsembleError(ModelRequestError):
    pass


def _dataset_of(member) -> int:
    return member.dataset_id if isinstance(member, TrainedModel) else member.study.dataset_id


def _check_member(member, team: Team) -> None:
    if isinstance(member, TrainedModel):
        if member.team_id != team.id:
            raise EnsembleError("A member belongs to another team.")
        if member.status != TrainedModel.Status.COMPLETED:
            raise EnsembleError(f"{member} has not completed; only finished models can join an ensemble.")
        if member.is_ensemble:
            raise EnsembleError(f"{member} is an ensemble itself; pick its members instead.")
    else:
        if member.study.team_id != team.id:
            raise EnsembleError("A member belongs to another team.")
        if member.status not in (Trial.Status.COMPLETED, Trial.Status.PRUNED) or member.checkpoint_id is None:
            raise EnsembleError(f"Trial {member.trial_id} of {member.study.name} has no completed checkpoint.")


def ensemble_members_resolve(*, team: Team, keys: list[str]) -> list:
    """Picked members ("model:<id>", "trial:<id>") as objects of this team; anything else,
    another team's included, is not found."""
    members = []
    for key in keys:
        kind, _, raw = key.partition(":")
        pk, found = parse_id(raw), None
        if pk and kind == "model":
            found = TrainedModel.objects.filter(pk=pk, team=team).first()
        elif pk and kind == "trial":
            found = Trial.objects.filter(pk=pk, study__team=team).select_related("study").first()
        if found is None:
            raise EnsembleError(f"Member {key} was not found in this team.")
        members.append(found)
    return members


def default_ensemble_name(*, method: str, dataset: Dataset) -> str:
    """`ensemble-<method>-<dataset>`: ensembles of different datasets never share a name (they take
    different inputs); the same recipe on the same dataset made again counts its version up."""
    return f"ensemble-{method.replace('_', '-')}-{slugify(dataset.name) or dataset.id}"[:MAX_MODEL_NAME].rstrip("-_")


def ensemble_create(*, team: Team, user, members: list, method: str, rounds: int = 50, seed: int = 0,
                    name: str = "") -> TrainedModel:
    """`members` are TrainedModels and/or Trials of one dataset. All saved, or nothing."""
    if method not in METHODS:
        raise EnsembleError(f"Unknown ensemble method {method!r}.")
    if len(members) < 2:
        raise EnsembleError("Pick at least two members: an ensemble of one is that model.")
    if len({(type(m).__name__, m.pk) for m in members}) != len(members):
        raise EnsembleError("A member is picked twice.")
    if method == TrainedModel.Method.GREEDY and not 1 <= rounds <= MAX_ROUNDS:
        raise EnsembleError(f"Greedy selection needs between 1 and {MAX_ROUNDS} rounds.")
    for member in members:
        _check_member(member, team)
    datasets = {_dataset_of(m) for m in members}
    if len(datasets) > 1:
        raise EnsembleError("The members were trained on different datasets; an ensemble averages predictions "
                            "of one dataset's rows, so pick members of one dataset.")
    dataset_id = datasets.pop()
    name = check_model_name(name.strip() or default_ensemble_name(method=method,
                                                                   dataset=Dataset.objects.get(pk=dataset_id)))
    with transaction.atomic():
        version = last_version_locked(team_id=team.id, name=name) + 1
        ensemble = TrainedModel.objects.create(
            team=team, kind=TrainedModel.Kind.ENSEMBLE, dataset_id=dataset_id, name=name, version=version,
            method=method, greedy_rounds=rounds if method == TrainedModel.Method.GREEDY else None, seed=seed,
            created_by=user,
        )
        EnsembleMember.objects.bulk_create([
            EnsembleMember(ensemble=ensemble, position=i,
                           model=m if isinstance(m, TrainedModel) else None,
                           trial=m if isinstance(m, Trial) else None)
            for i, m in enumerate(members)
        ])
        job_send(kind=JOB_KINDS["models"], row=ensemble)
    return ensemble

