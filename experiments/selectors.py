"""Reads for pages and the API. Everything is scoped to a team."""

from collections.abc import Iterator

from django.db.models import Count, F, Q, QuerySet, Sum
from django.utils import timezone

from experiments.models import (
    AuditEvent,
    Dataset,
    Invitation,
    Membership,
    ModelFile,
    NotificationDelivery,
    Study,
    Team,
    TrainedModel,
    Trial,
    Webhook,
)
from experiments.presentation import figures
from experiments.presentation.ranking_rule import (
    effective_ranking_metric,
    metric_direction,
    rank_models,
    recorded_test_metrics,
    tie_breaks,
)
from experiments.tuning.space_values import default_initial_random_trials

# Trials that produced a result (a pruned one is cut short, not failed).
WITH_RESULTS = (Trial.Status.COMPLETED, Trial.Status.PRUNED)


def team_datasets(*, team: Team) -> QuerySet[Dataset]:
    return Dataset.objects.filter(team=team).order_by("-created")


def team_studies(*, team: Team) -> QuerySet[Study]:
    return (
        Study.objects.filter(team=team).select_related("dataset")
        .annotate(finished_trials=Count("trials", filter=Q(trials__status__in=WITH_RESULTS)))
        .order_by("-created")
    )


def study_trials_by_score(*, study: Study, limit: int = 100, status: str = "") -> tuple[list[Trial], int]:
    """The trial table: the best completed trials, then the running ones, then the latest
    pruned/failed/cancelled/lost, at most `limit` in all (running ones always shown); and how
    many trials the study has. With `status`, only the trials in that state (best first when
    they have scores) and how many there are."""
    score_order = F("score").desc(nulls_last=True) if study.objective_direction == "max" else F("score").asc(
        nulls_last=True)
    trials = (Trial.objects.filter(study=study).select_related("seeded_from__study")
              .defer("kt_state", "seeded_from__kt_state"))
    if status:
        trials = trials.filter(status=status)
        order = (score_order, "number") if status in WITH_RESULTS else ("-number",)
        return list(trials.order_by(*order)[:limit]), trials.count()
    running = list(trials.filter(status=Trial.Status.RUNNING).order_by("number")[:limit])
    best = list(trials.filter(status=Trial.Status.COMPLETED).order_by(score_order, "number")[:limit - len(running)])
    # Pruned trials have scores too (their best before they were stopped): best first among them.
    pruned = list(trials.filter(status=Trial.Status.PRUNED).order_by(score_order, "number")
                  [:max(0, limit - len(running) - len(best))])
    rest = list(trials.exclude(status__in=[Trial.Status.RUNNING, Trial.Status.COMPLETED, Trial.Status.PRUNED])
                .order_by("-number")[:max(0, limit - len(running) - len(best) - len(pruned))])
    return best + running + pruned + rest, trials.count()


def study_best_trial(*, study: Study) -> Trial | None:
    order = "-score" if study.objective_direction == "max" else "score"
    return Trial.objects.filter(study=study, status=Trial.Status.COMPLETED).order_by(order, "number").first()


def study_top_trials(*, study: Study, n: int, include_pruned: bool = False) -> list[Trial]:
    """The best n trials to make models from: completed ones, and pruned ones only when asked
    (a pruned trial's score is its best before it was stopped, short of its full training)."""
    order = "-score" if study.objective_direction == "max" else "score"
    statuses = WITH_RESULTS if include_pruned else (Trial.Status.COMPLETED,)
    return list(Trial.objects.filter(study=study, status__in=statuses, score__isnull=False)
                .order_by(order, "number")[:n])


def team_models(*, team: Team) -> QuerySet[TrainedModel]:
    return (TrainedModel.objects.filter(team=team).select_related("study", "trial", "dataset")
            .annotate(member_count=Count("members")).order_by("-created"))


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


def study_models(*, study: Study, limit: int = 10) -> tuple[list[TrainedModel], int]:
    """The latest models made from the study, and how many there are in all."""
    models = TrainedModel.objects.filter(study=study)
    latest = list(models.select_related("trial").only(
        "id", "name", "version", "status", "test_metrics", "created", "trial__trial_id", "trial__number")
        .order_by("-created")[:limit])
    return latest, models.count()


def model_epoch_rows(*, model: TrainedModel) -> list[dict]:
    return list(model.epoch_rows.values("phase", "epoch", "metrics"))


def model_learning_curves(*, model: TrainedModel, epoch_rows: list[dict]) -> dict | None:
    """The model page's chart: per phase for a retrain (best-epoch detection, then the retrain
    on train+validation); a promoted model's are its trial's (it trained no further)."""
    from experiments.models import TrainedModelEpoch
    from experiments.presentation import study_charts

    if model.is_ensemble:
        return None
    if model.method == TrainedModel.Method.PROMOTE and model.trial_id:
        rows = trial_epoch_rows(trial=model.trial)
        series = study_charts.series_by(rows, "execution", lambda e: f"search trial, execution {e + 1}")
        marks = [{"epoch": model.trial.best_epoch, "label": "best epoch"}] if model.trial.best_epoch else []
    else:
        labels = dict(TrainedModelEpoch.Phase.choices)
        series = study_charts.series_by(epoch_rows, "phase", lambda p: labels.get(p, p))
        marks = []
        if model.best_epoch and model.epoch_source == TrainedModel.EpochSource.DETECT:
            marks.append({"epoch": model.best_epoch, "label": "best epoch"})
        detected = [row["epoch"] + 1 for row in epoch_rows if row["phase"] == TrainedModelEpoch.Phase.BEST_EPOCH]
        if detected and max(detected) >= model.epoch_cap:  # drawn only where it stopped the detection
            marks.append({"epoch": model.epoch_cap, "label": "epoch cap"})
    return study_charts.learning_curves(series, task=model.dataset.task, marks=marks)


def model_files(*, model: TrainedModel) -> list[ModelFile]:
    return list(model.files.select_related("artifact"))


def study_progress(*, study: Study) -> dict:
    counts = dict(
        Trial.objects.filter(study=study).values_list("status").annotate(n=Count("id")).values_list("status", "n")
    )
    completed = counts.get(Trial.Status.COMPLETED, 0)
    failed = counts.get(Trial.Status.FAILED, 0)
    pruned = counts.get(Trial.Status.PRUNED, 0)
    finished = completed + failed + pruned
    at_last_epoch = Trial.objects.filter(study=study, status=Trial.Status.COMPLETED,
                                         best_epoch__gte=study.epochs).count() if completed else 0
    return {
        "completed": completed,
        "failed": failed,
        "pruned": pruned,
        "running": counts.get(Trial.Status.RUNNING, 0),
        "finished": finished,
        "by_status": counts,
        "max_trials": study.max_trials,
        "percent": min(100, round(100 * finished / study.max_trials)) if study.max_trials else 0,
        "exploration": bayesian_exploration(study=study, completed=completed),
        "still_improving": figures.study_still_improving(completed=completed, at_last_epoch=at_last_epoch,
                                                         epochs=study.epochs),
    }


def study_pruning_savings(*, study: Study) -> dict | None:
    """What pruning saved (see pruning_savings); None when the study does not prune."""
    if study.pruner == "none":
        return None
    totals = Trial.objects.filter(study=study, status=Trial.Status.PRUNED).aggregate(
        trials=Count("id"), trained=Sum("epochs_trained"))
    return pruning_savings(study, pruned=totals["trials"], trained=totals["trained"] or 0)


def pruning_savings(study: Study, *, pruned: int, trained: int) -> dict | None:
    """The epochs `pruned` trials did not train (the study's epochs × executions each would have
    had at most, less the `trained` ones) times the devices each trial runs on: a GPU or TPU
    trial counts its devices per trial; a CPU trial counts as one device, whatever its logical
    devices. An upper bound: patience might have stopped some of them earlier anyway."""
    if study.pruner == "none":
        return None
    epochs = pruned * study.epochs * study.executions_per_trial - trained
    devices = study.devices_per_trial if study.queue in (Study.Queue.GPU, Study.Queue.TPU) else 1
    return {"pruned": pruned, "epochs": epochs, "device_epochs": epochs * devices, "devices": devices,
            "unit": f"{study.queue.upper()}-epoch{'' if epochs * devices == 1 else 's'}"}


def bayesian_exploration(*, study: Study, completed: int) -> dict | None:
    """Where a Bayesian study stands: KerasTuner proposes random trials until `initial` have
    completed, then its Gaussian process guides the search."""
    if study.tuner != Study.Tuner.BAYESIAN:
        return None
    initial = study.initial_random_trials or default_initial_random_trials(study.search_space)
    return {"initial": initial, "done": min(completed, initial), "exploring": completed < initial,
            "pure_random": study.max_trials <= initial, "default": study.initial_random_trials is None}


def study_trials_export(*, study: Study) -> tuple[list[str], Iterator[list]]:
    """Every trial of the study as CSV rows (streamed from the database in chunks)."""
    names = [row["name"] for row in study.search_space]
    header = ["number", "trial_id", "attempt", "status", study.objective_metric, "best_epoch", "duration_seconds",
              "worker", "tags", "notes", "error", *names]
    trials = Trial.objects.filter(study=study).defer("kt_state").order_by("number").iterator(chunk_size=2000)
    rows = ([t.number, t.trial_id, t.attempt, t.status, t.score, t.best_epoch, t.duration_seconds, t.worker_host,
             " ".join(t.tags), t.notes, t.error, *[t.hyperparameters.get(n, "") for n in names]] for t in trials)
    return header, rows


def trials_compared(*, study: Study, trial_pks: list[int]) -> dict:
    """The picked trials of the study, the hyperparameter names among them, and their curves."""
    from experiments.models import TrialEpoch
    from experiments.presentation import study_charts

    trials = list(Trial.objects.filter(study=study, pk__in=trial_pks).order_by("number"))
    labels = {t.pk: figures.trial_label(t.number) for t in trials}
    epochs = TrialEpoch.objects.filter(trial_id__in=list(labels)).order_by("trial_id", "execution", "epoch")
    return {"trials": trials, "names": sorted({name for t in trials for name in t.hyperparameters}),
            "curves": study_charts.curves(list(epochs.values("trial_id", "execution", "epoch", "metrics")), labels)}


def study_eta_seconds(*, study: Study, capacity: dict | None = None) -> float | None:
    """Seconds until the study's last trial should end: the trials actually running, the
    observed durations and the slots it really gets (study_capacity), not the parallelism asked."""
    from experiments.presentation import study_charts

    if not study.is_active:
        return None
    capacity = capacity or study_capacity(study=study)
    trials = Trial.objects.filter(study=study)
    durations = list(trials.filter(status__in=WITH_RESULTS).exclude(duration_seconds=None).order_by("-number")
                     .values_list("duration_seconds", flat=True)[:200])
    now = timezone.now()
    running = [(now - started).total_seconds()
               for started in trials.filter(status=Trial.Status.RUNNING).values_list("started", flat=True)]
    finished = trials.filter(status__in=(*WITH_RESULTS, Trial.Status.FAILED)).count()
    return study_charts.eta_seconds(durations=durations, remaining=study.max_trials - finished - len(running),
                                    running_elapsed=running, slots=max(capacity["effective"], len(running)))


def queue_slots(*, now=None) -> dict[str, int]:
    """Trial slots per queue: the child processes (concurrency) of the live workers serving
    it, as each worker reported when it started. A worker serving two queues counts for both."""
    from experiments.models import Worker

    slots: dict[str, int] = {}
    for worker in Worker.objects.filter(stopped__isnull=True):
        if worker.is_alive(now):
            for queue in worker.queues:
                slots[queue] = slots.get(queue, 0) + worker.concurrency
    return slots


def queue_has_live_worker(*, queue: str, now=None) -> bool:
    return queue_slots(now=now).get(queue, 0) > 0


def study_capacity(*, study: Study, slots: dict[str, int] | None = None) -> dict:
    """How many trials the study can run at once: min(parallelism asked, slots on its queue)."""
    available = (queue_slots() if slots is None else slots).get(study.queue, 0)
    return {"requested": study.parallelism, "slots": available, "queue": study.queue,
            "effective": min(study.parallelism, available), "limited": 0 < available < study.parallelism}


def trial_epoch_rows(*, trial: Trial) -> list[dict]:
    return list(trial.epochs.values("execution", "epoch", "metrics"))


def trial_learning_curves(*, trial: Trial, epoch_rows: list[dict], reruns: list | None = None) -> dict:
    """The trial page's chart: one series per execution, the best epoch and the study's last
    marked; each finished re-run's curves beside the trial's own."""
    from experiments.presentation import study_charts

    executions = {row["execution"] for row in epoch_rows}
    series = study_charts.series_by(
        epoch_rows, "execution", lambda e: f"execution {e + 1}" if len(executions) > 1 else "this trial")
    for rerun in reruns or []:
        series += study_charts.series_by(
            rerun.epoch_rows, "execution",
            lambda e, n=rerun.number: f"re-run {n}, execution {e + 1}" if len(executions) > 1 else f"re-run {n}")
    marks = [{"epoch": trial.best_epoch, "label": "best epoch"}] if trial.best_epoch else []
    if epoch_rows and max(row["epoch"] for row in epoch_rows) + 1 >= trial.study.epochs:  # it ran to the limit
        marks.append({"epoch": trial.study.epochs, "label": "last epoch"})
    if trial.pruning.get("epoch"):
        marks.append({"epoch": trial.pruning["epoch"], "label": "pruned"})
    return study_charts.learning_curves(series, task=trial.study.dataset.task, marks=marks)


def trial_reruns(*, trial: Trial) -> list:
    """The trial's re-runs, newest first; each carries its epoch rows and, once completed, how
    close it came to the trial (experiments/tuning/reproducibility.py)."""
    from experiments.models import TrialRerun, TrialRerunEpoch
    from experiments.tuning.reproducibility import rerun_comparison

    reruns = list(TrialRerun.objects.filter(trial=trial).order_by("-number"))
    rows: dict[int, list[dict]] = {}
    for row in TrialRerunEpoch.objects.filter(rerun__trial=trial).values("rerun_id", "execution", "epoch", "metrics"):
        rows.setdefault(row.pop("rerun_id"), []).append(row)
    original = {"score": trial.score, "best_epoch": trial.best_epoch, "metrics": trial.metrics,
                "environment": trial.environment}
    for rerun in reruns:
        rerun.epoch_rows = rows.get(rerun.pk, [])
        rerun.comparison = None
        if rerun.status == TrialRerun.Status.COMPLETED:
            rerun.comparison = rerun_comparison(
                objective=trial.study.objective_metric, original=original,
                rerun={"score": rerun.score, "best_epoch": rerun.best_epoch, "metrics": rerun.metrics,
                       "environment": rerun.environment})
    return reruns


def fleet_rows(*, team: Team, now=None) -> list[dict]:
    """Every registered worker (the fleet is shared), whether it is alive, the trials of this
    team it is running, and how many trials of other teams (never which)."""
    from experiments.models import Worker

    now = now or timezone.now()
    running, others = {}, {}
    for trial in Trial.objects.filter(status=Trial.Status.RUNNING).select_related("study").order_by("number"):
        if trial.study.team_id == team.id:
            running.setdefault(trial.worker_name, []).append(trial)
        else:
            others[trial.worker_name] = others.get(trial.worker_name, 0) + 1
    return [
        {"worker": w, "alive": w.is_alive(now), "trials": running.get(w.name, []), "other_teams": others.get(w.name, 0)}
        for w in Worker.objects.all()
    ]


def dashboard_data(*, team: Team) -> dict:
    """Running studies with their progress, the fleet at a glance, the team's best models."""
    running = list(
        Study.objects.filter(team=team, status=Study.Status.RUNNING).select_related("dataset")
        .annotate(completed_trials=Count("trials", filter=Q(trials__status=Trial.Status.COMPLETED)),
                  failed_trials=Count("trials", filter=Q(trials__status=Trial.Status.FAILED)),
                  pruned_trials=Count("trials", filter=Q(trials__status=Trial.Status.PRUNED)),
                  running_trials=Count("trials", filter=Q(trials__status=Trial.Status.RUNNING)))
        .order_by("-started")
    )
    for study in running:
        finished = study.completed_trials + study.failed_trials + study.pruned_trials
        study.finished_trials = finished
        study.percent = min(100, round(100 * finished / study.max_trials)) if study.max_trials else 0
    fleet = fleet_rows(team=team)
    best = team_best_models(team=team)
    return {
        "running_studies": running,
        "fleet": {"alive": sum(1 for r in fleet if r["alive"]), "total": len(fleet),
                  "busy": sum(1 for r in fleet if r["alive"] and (r["trials"] or r["other_teams"])),
                  "queues": sorted({q for r in fleet if r["alive"] for q in r["worker"].queues})},
        "best_models": best,
    }


def study_chart_data(*, study: Study, curve_trials: int = 10) -> dict:
    """Everything the study page's charts draw, in four queries whatever the study's size.
    Hyperparameters are read for an even sample of the finished trials only (parallel
    coordinates and importance need no more), which keeps a 10,000-trial study fast."""
    from experiments.models import TrialEpoch
    from experiments.presentation import study_charts

    trials = list(Trial.objects.filter(study=study).order_by("number").values(
        "pk", "number", "trial_id", "status", "score", "duration_seconds"))
    completed = [t for t in trials if t["status"] == Trial.Status.COMPLETED and t["score"] is not None]
    ranked = sorted(completed, key=lambda t: t["score"], reverse=study.objective_direction == "max")
    running = [t for t in trials if t["status"] == Trial.Status.RUNNING]
    shown = {t["pk"]: figures.trial_label(t["number"]) for t in [*ranked[:curve_trials], *running]}
    epochs = list(TrialEpoch.objects.filter(trial_id__in=list(shown)).order_by("trial_id", "execution", "epoch")
                  .values("trial_id", "execution", "epoch", "metrics"))
    sample = [completed[i] for i in study_charts.downsample_indices(len(completed), study_charts.MAX_PARALLEL_TRIALS)]
    values = dict(Trial.objects.filter(pk__in=[t["pk"] for t in sample]).values_list("pk", "hyperparameters"))
    sample = [{**t, "hyperparameters": values.get(t["pk"], {})} for t in sample]
    names = study_charts.varying_hyperparameters(sample)
    importance = study_charts.importance(sample, names)  # also picks the parallel coordinates' axes
    return {
        "objective": study.objective_metric,
        "direction": study.objective_direction,
        "active": study.is_active,
        "history": study_charts.history(completed, study.objective_direction),
        "curves": study_charts.curves(epochs, shown),
        "parallel": study_charts.parallel_coordinates(
            sample, names, frozenset(r["name"] for r in study.search_space if r.get("sampling") == "log"),
            ranking=importance),
        "importance": importance,
        "importance_trials": len(sample),
        "eta_seconds": study_eta_seconds(study=study),
    }


LEADERBOARD_COLUMNS = ("test", "val", "name", "kind", "study", "hypermodel", "author", "created")
RECENT_DAYS = 30


def team_recorded_test_metrics(*, team: Team) -> list[str]:
    """The test metrics the team's finished models record: what the team may rank by."""
    finished = TrainedModel.objects.filter(team=team, status=TrainedModel.Status.COMPLETED)
    return recorded_test_metrics({"test_metrics": m} for m in finished.values_list("test_metrics", flat=True))


def ranking_for(*, team: Team, task: str, rows) -> dict:
    """How models of one dataset rank: the team's metric (or the task's default, or the default
    when none of `rows` records the team's), its direction, and a note when it fell back."""
    metric, note = effective_ranking_metric(team.ranking_metric, task, recorded_test_metrics(rows))
    return {"metric": metric, "direction": metric_direction(metric), "note": note, "ties": tie_breaks(metric),
            "chosen": team.ranking_metric}


def team_best_models(*, team: Team) -> list[dict]:
    """Rank 1 of the leaderboard of each dataset that had a model finish in the last 30 days,
    ranked by exactly the leaderboard's rule; by dataset name."""
    from datetime import timedelta

    from django.utils import timezone

    finished = TrainedModel.objects.filter(team=team, status=TrainedModel.Status.COMPLETED)
    recent = finished.filter(finished__gte=timezone.now() - timedelta(days=RECENT_DAYS)).values("dataset_id")
    by_dataset: dict[int, list[dict]] = {}
    for row in finished.filter(dataset_id__in=recent).values(
            "id", "name", "version", "kind", "method", "dataset_id", "dataset__name", "dataset__task", "test_metrics",
            "val_metrics", "trial__metrics", "created"):
        # Ties are broken by the validation figure the leaderboard shows.
        row["val_metrics"] = figures.model_validation(row).metrics
        by_dataset.setdefault(row["dataset_id"], []).append(row)
    best = []
    for rows in by_dataset.values():
        ranking = ranking_for(team=team, task=rows[0]["dataset__task"], rows=rows)
        top = rank_models(rows, ranking["metric"], ranking["direction"])[0]
        best.append({**top, "metric": ranking["metric"], "value": top["test_metrics"].get(ranking["metric"])})
    return sorted(best, key=lambda row: row["dataset__name"])


def leaderboard_datasets(*, team: Team) -> list[Dataset]:
    """The team's datasets that have at least one finished model, by name."""
    with_models = TrainedModel.objects.filter(team=team, status=TrainedModel.Status.COMPLETED)
    return list(Dataset.objects.filter(team=team, id__in=with_models.values("dataset_id"))
                .only("id", "name", "task").order_by("name"))


def leaderboard_filter_choices(*, team: Team, dataset: Dataset) -> dict:
    from django.contrib.auth import get_user_model

    studies = list(Study.objects.filter(team=team, dataset=dataset).only("id", "name", "hypermodel").order_by("name"))
    authors = TrainedModel.objects.filter(team=team, dataset=dataset).values("created_by")
    return {"studies": studies, "hypermodels": sorted({s.hypermodel for s in studies}),
            "authors": list(get_user_model().objects.filter(pk__in=authors).order_by("username"))}


def leaderboard(*, team: Team, dataset: Dataset, study_id: int | None = None, hypermodel: str = "",
                author_id: int | None = None, since=None, until=None, sort: str = "test",
                descending: bool | None = None) -> dict:
    """The team's finished models and ensembles of one dataset, ranked by the team's ranking
    metric (experiments/presentation/ranking_rule.py), each validation figure with its source beside it."""
    models = TrainedModel.objects.filter(team=team, dataset=dataset, status=TrainedModel.Status.COMPLETED)
    if study_id:
        models = models.filter(study_id=study_id)
    if hypermodel:
        models = models.filter(study__hypermodel=hypermodel)
    if author_id:
        models = models.filter(created_by_id=author_id)
    if since:
        models = models.filter(created__date__gte=since)
    if until:
        models = models.filter(created__date__lte=until)
    methods = dict(TrainedModel.Method.choices)
    rows = []
    # Plain values, not model instances: a thousand rows without the studies' JSON columns.
    for m in models.values("id", "name", "version", "kind", "method", "epoch_source", "best_epoch", "epoch_cap",
                           "study_id", "study__name", "study__hypermodel", "created_by__username", "created",
                           "test_metrics", "val_metrics", "trial__metrics", "hyperparameters", "report__weights"):
        validation = figures.model_validation(m)  # the figure every page shows for this model
        warning = ""
        if figures.retrain_hit_cap(m):
            warning = figures.CAP_REACHED.format(cap=m["epoch_cap"])
        elif figures.dominant_member(m["report__weights"]) is not None:
            warning = "Effectively a single model: one member carries at least 99% of the weight."
        rows.append({
            "id": m["id"], "label": f"{m['name']} v{m['version']}", "slug": f"{m['name']}-v{m['version']}",
            "model_name": m["name"], "version": m["version"], "study_id": m["study_id"],
            "test_metrics": m["test_metrics"], "val_metrics": validation.metrics,
            "val_source": validation.source.short, "warning": warning,
            "name": (m["name"], m["version"]), "kind": methods.get(m["method"], m["method"]),
            "study": m["study__name"] or "", "hypermodel": m["study__hypermodel"] or "ensemble",
            "author": m["created_by__username"] or "", "created": m["created"],
            "hp": {k: v for k, v in m["hyperparameters"].items() if not k.startswith("tuner/")},
        })
    ranking = ranking_for(team=team, task=dataset.task, rows=rows)
    metric, higher_is_better = ranking["metric"], ranking["direction"] == "max"
    # The rank follows the ranking rule whatever column the table is sorted by.
    for rank, row in enumerate(rank_models(rows, metric, ranking["direction"]), start=1):
        row["rank"] = rank
        row["test"], row["val"] = row["test_metrics"].get(metric), row["val_metrics"].get(metric)
    hp_names = sorted({name for row in rows for name in row["hp"]})
    if sort not in LEADERBOARD_COLUMNS and sort.removeprefix("hp:") not in hp_names:
        sort = "test"
    if sort == "test" and descending in (None, higher_is_better):
        return {"rows": sorted(rows, key=lambda r: r["rank"]), "metric": metric, "hp_names": hp_names,
                "sort": sort, "descending": higher_is_better, "ranking": ranking}
    if descending is None:
        descending = higher_is_better if sort in ("test", "val") else sort == "created"

    def key(row):
        value = row["hp"].get(sort[3:]) if sort.startswith("hp:") else row[sort]
        if isinstance(value, int | float) and not isinstance(value, bool):
            return (0, float(value), "")
        if isinstance(value, tuple):  # (name, version): versions compare as numbers
            return (0, 0.0, value[0], value[1])
        return (1, 0.0, str(value))  # text (and booleans) after numbers, compared as text

    def missing(row):
        return (row["hp"].get(sort[3:]) if sort.startswith("hp:") else row[sort]) is None

    rows = sorted((r for r in rows if not missing(r)), key=key, reverse=descending) + [r for r in rows if missing(r)]
    return {"rows": rows, "metric": metric, "hp_names": hp_names, "sort": sort, "descending": descending,
            "ranking": ranking}


def studies_compared(*, studies: list[Study]) -> dict:
    """Two to four studies side by side (experiments/presentation/comparison.py), in three queries
    whatever their size: every trial's row without its JSON, the hyperparameters of the sample
    the importance is estimated on, and the best trials' metrics and hyperparameters."""
    from experiments.presentation import comparison, importance

    comparison.check_selection(studies)
    trials: dict[int, list[dict]] = {s.id: [] for s in studies}
    for row in (Trial.objects.filter(study__in=list(trials)).order_by("study_id", "number", "pk")
                .values("pk", "study_id", "number", "status", "score")):
        trials[row["study_id"]].append(row)
    histories = {s.id: comparison.study_history(trials[s.id], s.objective_direction) for s in studies}
    samples = {sid: importance.sample(h["completed"]) for sid, h in histories.items()}
    best_pks = [h["best"]["pk"] for h in histories.values() if h["best"]]
    sampled_pks = [t["pk"] for sample in samples.values() for t in sample]
    values = dict(Trial.objects.filter(pk__in=sampled_pks).values_list("pk", "hyperparameters"))
    best_rows = {row["pk"]: row for row in Trial.objects.filter(pk__in=best_pks).values(
        "pk", "number", "score", "metrics", "hyperparameters")}
    return comparison.comparison(
        studies=[{"id": s.id, "name": s.name, "tuner": s.tuner, "tuner_label": s.get_tuner_display(),
                  "hypermodel": s.hypermodel, "status": s.status, "objective_metric": s.objective_metric,
                  "objective_direction": s.objective_direction} for s in studies],
        histories=histories, best_rows=best_rows,
        importance_trials={sid: [{"score": t["score"], "hyperparameters": values.get(t["pk"], {})} for t in sample]
                           for sid, sample in samples.items()})
def team_webhooks(*, team: Team) -> list[Webhook]:
    return list(Webhook.objects.filter(team=team).order_by("name", "id"))


def team_deliveries(*, team: Team, limit: int | None = 25):
    """The latest notification deliveries of the team (e-mails and webhook calls), newest first."""
    rows = (NotificationDelivery.objects.filter(event__team=team).select_related("event", "webhook", "user")
            .defer("event__payload").order_by("-created", "-id"))
    return rows if limit is None else rows[:limit]


# Teams and invitations


def membership_current(*, user, team_id: int | None = None) -> Membership | None:
    """The membership a request acts in: `team_id`'s when the user is a member of it (the team in
    the session), else the team the user chose last, else their oldest membership. Never picked by
    name: a team someone else names 'AAA' must not become a new login's team."""
    memberships = Membership.objects.filter(user=user).select_related("team")
    if team_id is not None:
        chosen = memberships.filter(team_id=team_id).first()
        if chosen is not None:
            return chosen
    return memberships.order_by(F("last_chosen").desc(nulls_last=True), "pk").first()


def invitations_for_user(*, user) -> list[Invitation]:
    """Open invitations addressed to this account (by username, or by its e-mail address), for
    teams it is not in yet, oldest first."""
    match = Q(username__iexact=user.get_username())
    if user.email:
        match |= Q(email__iexact=user.email, username="")
    rows = (Invitation.objects.filter(match, accepted_at__isnull=True, declined_at__isnull=True,
                                      expires__gt=timezone.now())
            .exclude(team__memberships__user=user).select_related("team", "created_by").order_by("created"))
    return list(rows)


def team_audit_events(*, team: Team, actor_id: int | None = None, verb: str = "", since=None, until=None):
    """The team's audit log, newest first, filtered by who, what and when (dates inclusive, UTC)."""
    rows = AuditEvent.objects.filter(team=team).select_related("actor", "content_type").order_by("-timestamp", "-id")
    if actor_id is not None:
        rows = rows.filter(actor_id=actor_id)
    if verb:
        rows = rows.filter(verb=verb)
    if since is not None:
        rows = rows.filter(timestamp__date__gte=since)
    if until is not None:
        rows = rows.filter(timestamp__date__lte=until)
    return rows


def team_audit_actors(*, team: Team) -> list[tuple[int, str]]:
    """Everyone who appears in the team's audit log (members past and present), by name."""
    rows = (AuditEvent.objects.filter(team=team, actor__isnull=False).order_by()
            .values_list("actor_id", "actor__username").distinct())
    return sorted(rows, key=lambda row: row[1].casefold())


def studies_tagged(*, team: Team, tag: str) -> list[int]:
    """Ids of the team's studies with a trial tagged `tag` (tags are stored lower-case). Read in
    Python: SQLite has no JSON containment, and only the few tagged trials are read."""
    wanted = tag.strip().lower()
    rows = Trial.objects.filter(study__team=team).exclude(tags=[]).values_list("study_id", "tags")
    return sorted({study_id for study_id, tags in rows if wanted in tags})
