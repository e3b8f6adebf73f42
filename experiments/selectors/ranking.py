"""Reads for ranking models: the leaderboard and the dashboard's best models, by one rule."""

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.utils import timezone

from experiments.models import Dataset, Study, Team, TrainedModel
from experiments.presentation import figures
from experiments.presentation.ranking_rule import (
    effective_ranking_metric,
    metric_direction,
    rank_models,
    recorded_test_metrics,
    tie_breaks,
)
from experiments.selectors.device_time import model_lineage_device_seconds
from experiments.selectors.trials import pareto_rows

LEADERBOARD_COLUMNS = ("test", "val", "name", "kind", "study", "hypermodel", "author", "created", "device_seconds")


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
    studies = list(Study.objects.filter(team=team, dataset=dataset).only("id", "name", "hypermodel").order_by("name"))
    authors = TrainedModel.objects.filter(team=team, dataset=dataset).values("created_by")
    return {"studies": studies, "hypermodels": sorted({s.hypermodel for s in studies}),
            "authors": list(get_user_model().objects.filter(pk__in=authors).order_by("username"))}


def _lineage_seconds(m: dict) -> float | None:
    """A row's lineage device time: its job and its trial from the row's own values; an ensemble's
    members need their own reads (ensembles are few on a board)."""
    if m["kind"] == TrainedModel.Kind.ENSEMBLE:
        return model_lineage_device_seconds(TrainedModel.objects.get(pk=m["id"]))
    known = [s for s in (m["device_seconds"], m["trial__device_seconds"]) if s is not None]
    return sum(known) if known else None


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
    front_cache: dict[int, set[int]] = {}

    def fronts(study_id: int) -> set[int]:
        """The trial ids on a multi-objective study's Pareto front (one read per such study)."""
        if study_id not in front_cache:
            study = Study.objects.get(pk=study_id)
            front_cache[study_id] = {row["trial"].pk for row in pareto_rows(study=study, include_pruned=True)}
        return front_cache[study_id]

    # Plain values, not model instances: a thousand rows without the studies' JSON columns.
    for m in models.values("id", "name", "version", "kind", "method", "epoch_source", "best_epoch", "epoch_cap",
                           "study_id", "study__name", "study__hypermodel", "created_by__username", "created",
                           "test_metrics", "val_metrics", "trial__metrics", "hyperparameters", "report__weights",
                           "trial_id", "study__extra_objectives", "device_seconds", "trial__device_seconds"):
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
            # Several objectives: the trial's other objective values, and whether it is on the front.
            "objectives": [(o["metric"], (m["trial__metrics"] or {}).get(o["metric"]))
                           for o in m["study__extra_objectives"] or []],
            "on_front": m["trial_id"] in fronts(m["study_id"]) if m["study__extra_objectives"] else None,
            "device_seconds": _lineage_seconds(m),
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
