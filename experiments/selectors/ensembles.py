"""Reads for ensembles: what one may be made of, and an ensemble's members."""

from experiments.models import Study, Team, TrainedModel, Trial
from experiments.presentation import figures
from experiments.selectors.trials import WITH_RESULTS


def ensemble_candidates(*, team: Team, trials_per_study: int = 5, include_pruned: bool = False) -> list[dict]:
    """What an ensemble may be made of, by dataset: the team's completed single models, and
    the best few checkpointed trials of each study (best first; pruned ones only when asked)."""
    groups: dict[int, dict] = {}

    def group(dataset):
        return groups.setdefault(dataset.id, {"dataset": dataset, "models": [], "trials": []})

    models = (TrainedModel.objects.filter(team=team, kind=TrainedModel.Kind.SINGLE,
                                          status=TrainedModel.Status.COMPLETED)
              .select_related("dataset", "study", "trial").order_by("name", "version"))
    for model in models:
        model.validation = figures.model_validation(model)  # what the weights will be fitted on
        group(model.dataset)["models"].append(model)
    for study in Study.objects.filter(team=team).select_related("dataset").order_by("name"):
        order = "-score" if study.objective_direction == "max" else "score"
        statuses = WITH_RESULTS if include_pruned else (Trial.Status.COMPLETED,)
        trials = (Trial.objects.filter(study=study, status__in=statuses, checkpoint__isnull=False)
                  .order_by(order, "number")[:trials_per_study])
        for trial in trials:
            trial.study = study
            trial.validation = figures.validation(trial)
            group(study.dataset)["trials"].append(trial)
    return [g for g in groups.values() if len(g["models"]) + len(g["trials"]) >= 1]


def ensemble_members(*, ensemble: TrainedModel) -> list:
    """The members in position order, each with its display label, its one validation figure
    (what the weights were fitted on, as its own page shows it) and whether it dominates the blend."""
    members = list(ensemble.members.select_related("model__trial", "trial__study"))
    dominant = figures.dominant_member([m.weight for m in members]) if members else None
    for i, member in enumerate(members):
        member.display_label = figures.member_label(member)
        member.validation = figures.member_validation(member)
        member.dominant = i == dominant
    return members
