"""Reads for pages and the API. Everything is scoped to a team."""

from django.db.models import Count, F, Q, QuerySet

from experiments.models import Dataset, ModelFile, Study, Team, TrainedModel, Trial


def team_datasets(*, team: Team) -> QuerySet[Dataset]:
    return Dataset.objects.filter(team=team).order_by("-created")


def team_studies(*, team: Team) -> QuerySet[Study]:
    return (
        Study.objects.filter(team=team).select_related("dataset")
        .annotate(finished_trials=Count("trials", filter=Q(trials__status=Trial.Status.COMPLETED)))
        .order_by("-created")
    )


def study_trials_by_score(*, study: Study) -> QuerySet[Trial]:
    """Completed trials best first, then running, then the rest in start order."""
    score = F("score")
    score_order = score.desc(nulls_last=True) if study.objective_direction == "max" else score.asc(nulls_last=True)
    status_rank = {Trial.Status.COMPLETED: 0, Trial.Status.RUNNING: 1}
    trials = list(Trial.objects.filter(study=study).order_by(score_order, "number"))
    trials.sort(key=lambda t: status_rank.get(t.status, 2))
    return trials


def study_best_trial(*, study: Study) -> Trial | None:
    order = "-score" if study.objective_direction == "max" else "score"
    return Trial.objects.filter(study=study, status=Trial.Status.COMPLETED).order_by(order, "number").first()


def study_top_trials(*, study: Study, n: int) -> list[Trial]:
    order = "-score" if study.objective_direction == "max" else "score"
    return list(Trial.objects.filter(study=study, status=Trial.Status.COMPLETED).order_by(order, "number")[:n])


def team_models(*, team: Team) -> QuerySet[TrainedModel]:
    return (TrainedModel.objects.filter(team=team).select_related("study", "trial", "dataset")
            .annotate(member_count=Count("members")).order_by("-created"))


def ensemble_candidates(*, team: Team, trials_per_study: int = 5) -> list[dict]:
    """What an ensemble may be made of, by dataset: the team's completed single models, and
    the best few checkpointed trials of each study (best first)."""
    groups: dict[int, dict] = {}

    def group(dataset):
        return groups.setdefault(dataset.id, {"dataset": dataset, "models": [], "trials": []})

    models = (TrainedModel.objects.filter(team=team, kind=TrainedModel.Kind.SINGLE,
                                          status=TrainedModel.Status.COMPLETED)
              .select_related("dataset", "study", "trial").order_by("name", "version"))
    for model in models:
        group(model.dataset)["models"].append(model)
    for study in Study.objects.filter(team=team).select_related("dataset").order_by("name"):
        order = "-score" if study.objective_direction == "max" else "score"
        trials = (Trial.objects.filter(study=study, status=Trial.Status.COMPLETED, checkpoint__isnull=False)
                  .order_by(order, "number")[:trials_per_study])
        for trial in trials:
            trial.study = study
            group(study.dataset)["trials"].append(trial)
    return [g for g in groups.values() if len(g["models"]) + len(g["trials"]) >= 1]


def ensemble_members(*, ensemble: TrainedModel) -> list:
    return list(ensemble.members.select_related("model", "trial__study"))


def study_models(*, study: Study) -> QuerySet[TrainedModel]:
    return TrainedModel.objects.filter(study=study).select_related("trial").order_by("-created")


def model_epoch_rows(*, model: TrainedModel) -> list[dict]:
    return list(model.epoch_rows.values("phase", "epoch", "metrics"))


def model_files(*, model: TrainedModel) -> list[ModelFile]:
    return list(model.files.select_related("artifact"))


def study_progress(*, study: Study) -> dict:
    counts = dict(
        Trial.objects.filter(study=study).values_list("status").annotate(n=Count("id")).values_list("status", "n")
    )
    completed = counts.get(Trial.Status.COMPLETED, 0)
    failed = counts.get(Trial.Status.FAILED, 0)
    finished = completed + failed
    return {
        "completed": completed,
        "failed": failed,
        "running": counts.get(Trial.Status.RUNNING, 0),
        "finished": finished,
        "max_trials": study.max_trials,
        "percent": min(100, round(100 * finished / study.max_trials)) if study.max_trials else 0,
    }


def trial_epoch_rows(*, trial: Trial) -> list[dict]:
    return list(trial.epochs.values("execution", "epoch", "metrics"))


def fleet_rows(*, now=None) -> list[dict]:
    """Every registered worker with whether it is alive and the trials it is running."""
    from django.utils import timezone

    from experiments.models import Worker

    now = now or timezone.now()
    running = {}
    for trial in Trial.objects.filter(status=Trial.Status.RUNNING).select_related("study").order_by("number"):
        running.setdefault(trial.worker_name, []).append(trial)
    return [
        {"worker": w, "alive": w.is_alive(now), "trials": running.get(w.name, [])}
        for w in Worker.objects.all()
    ]


def queue_has_live_worker(*, queue: str, now=None) -> bool:
    from experiments.models import Worker

    return any(w.is_alive(now) and queue in w.queues for w in Worker.objects.filter(stopped__isnull=True))
