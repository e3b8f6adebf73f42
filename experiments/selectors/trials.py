"""Reads of a study's trials: the trial table, the best ones, their curves and the CSV export."""

from collections.abc import Iterator

from django.db.models import F, OuterRef, Q, Subquery
from django.db.models.fields.json import KeyTransform

from experiments.models import Study, Team, Trial, TrialEpoch
from experiments.presentation import figures, study_charts
from experiments.tuning.objectives import directions, objective_values, pareto_front

# Trials that produced a result (a pruned one is cut short, not failed).
WITH_RESULTS = (Trial.Status.COMPLETED, Trial.Status.PRUNED)

# The trial columns a list may be ordered by; any other name is a metric (or hp.<name>).
ORDER_COLUMNS = ("score", "number", "started", "finished", "duration_seconds", "id")


def trial_order(name: str, *, descending: bool):
    """A trial list's order by a column, a hyperparameter (hp.<name>) or a metric, nulls last."""
    if name in ORDER_COLUMNS:
        expression = F(name)
    elif name.startswith("hp."):
        expression = KeyTransform(name[3:], "hyperparameters")
    else:
        expression = KeyTransform(name, "metrics")
    return expression.desc(nulls_last=True) if descending else expression.asc(nulls_last=True)


def study_trials_by_score(*, study: Study, limit: int = 100, status: str = "") -> tuple[list[Trial], int]:
    """The trial table, best first with running trials always shown, and how many trials the study (or the `status`
    asked for) has."""
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


def _best_trial_pks(study_ids: list[int], order: tuple[str, ...]):
    """Each study's best completed trial by `order` (evaluated once per study, not per trial)."""
    best = (Trial.objects.filter(study_id=OuterRef("pk"), status=Trial.Status.COMPLETED)
            .exclude(feasible=False).order_by(*order))  # an infeasible trial is never "best"
    return Study.objects.filter(pk__in=study_ids).annotate(best_pk=Subquery(best.values("pk")[:1])).values("best_pk")


def studies_best_trials(*, studies: list[Study]) -> dict[int, Trial]:
    """Each study's best completed trial (by its objective's direction, then the earliest), by study
    id; one query whatever the number of studies."""
    if not studies:
        return {}
    maximised = [study.pk for study in studies if study.objective_direction == "max"]
    minimised = [study.pk for study in studies if study.objective_direction != "max"]
    wanted = Q()
    if maximised:
        wanted |= Q(pk__in=_best_trial_pks(maximised, ("-score", "number")))
    if minimised:
        wanted |= Q(pk__in=_best_trial_pks(minimised, ("score", "number")))
    # The seed source is read with it: the API shows where a warm-start trial came from.
    best = Trial.objects.filter(wanted).select_related("seeded_from").defer("seeded_from__kt_state")
    return {trial.study_id: trial for trial in best}


def study_best_trial(*, study: Study) -> Trial | None:
    return studies_best_trials(studies=[study]).get(study.pk)


def study_top_trials(*, study: Study, n: int, include_pruned: bool = False) -> list[Trial]:
    """The best n trials to make models from: completed ones, and pruned ones only when asked
    (a pruned trial's score is its best before it was stopped, short of its full training)."""
    order = "-score" if study.objective_direction == "max" else "score"
    statuses = WITH_RESULTS if include_pruned else (Trial.Status.COMPLETED,)
    if study.extra_objectives:  # several objectives: the Pareto front, by the first objective
        return [row["trial"] for row in pareto_rows(study=study, include_pruned=include_pruned)[:n]]
    return list(Trial.objects.filter(study=study, status__in=statuses, score__isnull=False)
                .exclude(feasible=False).order_by(order, "number")[:n])


def pareto_chart(*, study: Study) -> dict:
    """Every completed trial with a value for each objective, marked on the front or not, and
    infeasible ones apart: the study page's Pareto chart (one query)."""
    trials = list(Trial.objects.filter(study=study, status=Trial.Status.COMPLETED, score__isnull=False)
                  .order_by("number").values("pk", "number", "score", "metrics", "feasible"))
    points = [(t, objective_values(t["metrics"], t["score"], study)) for t in trials]
    points = [(t, v) for t, v in points if all(x is not None for x in v)]
    feasible = [(t, v) for t, v in points if t["feasible"] is not False]
    front = {feasible[i][0]["pk"] for i in pareto_front([v for _, v in feasible], directions(study))}
    return {"objectives": [f"{d} {m}" for m, d in zip(objective_names(study), directions(study), strict=True)],
            "points": [{"number": t["number"], "values": v, "front": t["pk"] in front,
                        "feasible": t["feasible"] is not False} for t, v in points]}


def objective_names(study: Study) -> list[str]:
    return [study.objective_metric] + [row["metric"] for row in study.extra_objectives]


def pareto_rows(*, study: Study, include_pruned: bool = False) -> list[dict]:
    """The study's Pareto front: its feasible trials with a value for every objective that no
    other such trial beats on all of them, best first by the first objective. Each row: the
    trial and its objective values (experiments/tuning/objectives.py)."""
    statuses = WITH_RESULTS if include_pruned else (Trial.Status.COMPLETED,)
    candidates = [(t, objective_values(t.metrics, t.score, study))
                  for t in Trial.objects.filter(study=study, status__in=statuses, score__isnull=False)
                  .exclude(feasible=False).defer("kt_state").order_by("number")]
    candidates = [(t, v) for t, v in candidates if all(x is not None for x in v)]
    front = [candidates[i] for i in pareto_front([v for _, v in candidates], directions(study))]
    first = 1 if study.objective_direction == "min" else -1
    return [{"trial": t, "values": v} for t, v in sorted(front, key=lambda pair: (first * pair[1][0], pair[0].number))]


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
    trials = list(Trial.objects.filter(study=study, pk__in=trial_pks).order_by("number"))
    labels = {t.pk: figures.trial_label(t.number) for t in trials}
    epochs = TrialEpoch.objects.filter(trial_id__in=list(labels)).order_by("trial_id", "execution", "epoch")
    return {"trials": trials, "names": sorted({name for t in trials for name in t.hyperparameters}),
            "curves": study_charts.curves(list(epochs.values("trial_id", "execution", "epoch", "metrics")), labels)}


def trial_epoch_rows(*, trial: Trial) -> list[dict]:
    return list(trial.epochs.values("execution", "epoch", "metrics"))


def trial_learning_curves(*, trial: Trial, epoch_rows: list[dict], reruns: list | None = None) -> dict:
    """The trial page's chart: one series per execution, the best epoch and the study's last
    marked; each finished re-run's curves beside the trial's own."""
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


def team_trial(*, team: Team, study_id: int, trial_pk: int) -> Trial | None:
    return Trial.objects.select_related("study").filter(pk=trial_pk, study_id=study_id, study__team=team).first()


def trial_running_count(*, study: Study) -> int:
    return Trial.objects.filter(study=study, status=Trial.Status.RUNNING).count()
