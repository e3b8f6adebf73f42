"""Reads of studies: the study list, a study's figures and charts, and studies side by side."""

from django.db.models import Count, F, Q, QuerySet, Sum
from django.utils import timezone

from experiments.models import Study, Team, Trial, TrialEpoch
from experiments.presentation import comparison, figures, importance, study_charts
from experiments.selectors.fleet import study_capacity
from experiments.selectors.trials import WITH_RESULTS, pareto_chart
from experiments.tuning.pruning_options import MODEL_FIELDS as PRUNING_FIELDS
from experiments.tuning.space_values import default_initial_random_trials
from experiments.tuning.stopping_rules import MODEL_FIELDS as STOPPING_FIELDS
from experiments.tuning.tuners import GUIDED_TUNERS

# What pages, the API and notifications show of a study's trials, as annotations of Study rows so
# that one query reads them for any number of studies: the trials in each state, the epochs the
# pruned ones trained, and the completed ones whose best epoch was the last (still improving).
TRIAL_FIGURES = {
    **{f"trials_{state}": Count("trials", filter=Q(trials__status=state)) for state in Trial.Status.values},
    "pruned_epochs_trained": Sum("trials__epochs_trained", filter=Q(trials__status=Trial.Status.PRUNED)),
    "device_seconds": Sum("trials__device_seconds"),
    "trials_at_last_epoch": Count("trials", filter=Q(trials__status=Trial.Status.COMPLETED,
                                                     trials__best_epoch__gte=F("epochs"))),
}


def progress_from(study: Study, figures_row) -> dict:
    """The study's progress from its TRIAL_FIGURES: the one definition of every count and share the pages, API and
    notifications show."""
    value = figures_row.get if isinstance(figures_row, dict) else lambda name: getattr(figures_row, name)
    by_status = {state: value(f"trials_{state}") for state in Trial.Status.values if value(f"trials_{state}")}
    completed = by_status.get(Trial.Status.COMPLETED, 0)
    failed = by_status.get(Trial.Status.FAILED, 0)
    pruned = by_status.get(Trial.Status.PRUNED, 0)
    finished = completed + failed + pruned
    return {
        "device_seconds": value("device_seconds") or 0.0,  # every ended trial's wall time x devices held
        "completed": completed,
        "failed": failed,
        "pruned": pruned,
        "running": by_status.get(Trial.Status.RUNNING, 0),
        "finished": finished,
        "with_results": completed + pruned,
        "total": sum(by_status.values()),
        "by_status": by_status,
        "max_trials": study.max_trials,
        "percent": min(100, round(100 * finished / study.max_trials)) if study.max_trials else 0,
        "pruned_epochs_trained": value("pruned_epochs_trained") or 0,
        "exploration": bayesian_exploration(study=study, completed=completed),
        "still_improving": figures.study_still_improving(completed=completed,
                                                         at_last_epoch=value("trials_at_last_epoch"),
                                                         epochs=study.epochs),
    }


def with_progress(studies) -> list[Study]:
    """The studies of a queryset, each with its `progress` (progress_from), in the queryset's one query."""
    rows = list(studies.annotate(**TRIAL_FIGURES))
    for study in rows:
        study.progress = progress_from(study, study)
    return rows


def studies_progress(*, studies: list[Study]) -> dict[int, dict]:
    """The progress of studies already read, by id: one query whatever their number."""
    rows = Study.objects.filter(pk__in=[study.pk for study in studies]).order_by().values("pk").annotate(
        **TRIAL_FIGURES)
    by_pk = {row["pk"]: row for row in rows}
    return {study.pk: progress_from(study, by_pk[study.pk]) for study in studies if study.pk in by_pk}


def study_progress(*, study: Study) -> dict:
    return studies_progress(studies=[study])[study.pk]


def team_studies(*, team: Team) -> list[Study]:
    """The study list: the team's studies, newest first, each with its progress."""
    return with_progress(Study.objects.filter(team=team).select_related("dataset").order_by("-created"))


def study_pruning_savings(*, study: Study, progress: dict | None = None) -> dict | None:
    """What pruning saved (see pruning_savings); None when the study does not prune."""
    if study.pruner == "none":
        return None
    progress = progress or study_progress(study=study)
    return pruning_savings(study, pruned=progress["pruned"], trained=progress["pruned_epochs_trained"])


def pruning_savings(study: Study, *, pruned: int, trained: int) -> dict | None:
    """The device-epochs pruned trials did not train: an upper bound, since patience might have stopped some of them
    earlier anyway."""
    if study.pruner == "none":
        return None
    epochs = _planned_epochs(study, pruned) * study.executions_per_trial - trained
    devices = study.devices_per_trial if study.queue in (Study.Queue.GPU, Study.Queue.TPU) else 1
    return {"pruned": pruned, "epochs": epochs, "device_epochs": epochs * devices, "devices": devices,
            "unit": f"{study.queue.upper()}-epoch{'' if epochs * devices == 1 else 's'}"}


def _planned_epochs(study: Study, pruned: int) -> int:
    """The epochs the pruned trials were to train: each its segment's (an extension may have raised them; one query
    for an extended study, none otherwise)."""
    if not study.segments or not pruned:
        return pruned * study.epochs
    starts = [(segment["first_trial"], segment["epochs"]) for segment in study.segments]
    numbers = Trial.objects.filter(study=study, status=Trial.Status.PRUNED).values_list("number", flat=True)
    return sum(next(epochs for first, epochs in reversed(starts) if number >= first) for number in numbers)


def bayesian_exploration(*, study: Study, completed: int) -> dict | None:
    """Where a Bayesian study stands: KerasTuner proposes random trials until `initial` have
    completed, then its Gaussian process guides the search."""
    if study.tuner not in GUIDED_TUNERS:
        return None
    initial = study.initial_random_trials or default_initial_random_trials(study.search_space, study.max_trials)
    return {"initial": initial, "done": min(completed, initial), "exploring": completed < initial,
            "pure_random": study.max_trials <= initial, "default": study.initial_random_trials is None,
            "tuner": study.get_tuner_display(),
            "guide": "TPE's model of good and bad trials" if study.tuner == "optuna_tpe" else "the Gaussian process"}


def study_eta_seconds(*, study: Study, capacity: dict | None = None) -> float | None:
    """Seconds until the study's last trial should end: the trials actually running, the
    observed durations and the slots it really gets (study_capacity), not the parallelism asked."""
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


def study_chart_data(*, study: Study, curve_trials: int = 10) -> dict:
    """Everything the study page's charts draw, in four queries whatever the study's size.
    Hyperparameters are read for an even sample of the finished trials only (parallel
    coordinates and importance need no more), which keeps a 10,000-trial study fast."""
    trials = list(Trial.objects.filter(study=study).order_by("number").values(
        "pk", "number", "trial_id", "status", "score", "duration_seconds", "feasible"))
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
        "pareto": pareto_chart(study=study) if study.extra_objectives else None,
    }


def studies_compared(*, studies: list[Study]) -> dict:
    """Two to four studies side by side (experiments/presentation/comparison.py), in three queries
    whatever their size: every trial's row without its JSON, the hyperparameters of the sample
    the importance is estimated on, and the best trials' metrics and hyperparameters."""
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


def studies_tagged(*, team: Team, tag: str) -> list[int]:
    """Ids of the team's studies with a trial tagged `tag` (tags are stored lower-case). Read in
    Python: SQLite has no JSON containment, and only the few tagged trials are read."""
    wanted = tag.strip().lower()
    rows = Trial.objects.filter(study__team=team).exclude(tags=[]).values_list("study_id", "tags")
    return sorted({study_id for study_id, tags in rows if wanted in tags})


def team_study(*, team: Team, study_id: int) -> Study | None:
    return Study.objects.select_related("dataset").filter(pk=study_id, team=team).first()


def team_studies_by_id(*, team: Team, study_ids: list[int]) -> dict[int, Study]:
    """Those of `study_ids` that are the team's studies, by id."""
    # The oracle state may be large and nothing reading these needs it.
    studies = Study.objects.select_related("dataset").defer("oracle_state").filter(pk__in=study_ids, team=team)
    return {study.pk: study for study in studies}


def team_recent_studies(*, team: Team, limit: int = 10) -> QuerySet[Study]:
    return Study.objects.filter(team=team).select_related("dataset").order_by("-created")[:limit]


# What a clone takes from the original: everything that defines the search except where it runs
# (the dataset, which may change) and its name: space, tuner and its settings, objective, budget,
# training, compute and stopping rules. One list for the clone page and the API.
CLONED_FIELDS = ["hypermodel", "search_space", "tuner", "objective_metric", "objective_direction", "max_trials",
                 "executions_per_trial", "epochs", "batch_size", "patience", "seed", "queue", "backend", "parallelism",
                 "initial_random_trials", "precision", "jit_compile", "steps_per_execution", "devices_per_trial",
                 *PRUNING_FIELDS, *STOPPING_FIELDS, "extra_objectives", "constraints"]
NAME_ROOM = Study._meta.get_field("name").max_length - len(" (copy)")


def clone_values(study: Study) -> dict:
    """The new-study form's values for a copy of `study`, on the same dataset until changed."""
    return {**{name: getattr(study, name) for name in CLONED_FIELDS},
            "name": f"{study.name[:NAME_ROOM]} (copy)", "dataset": study.dataset_id}
