from datetime import date

from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import redirect, render

from experiments.forms.leaderboard import RankingForm
from experiments.models import Dataset
from experiments.presentation.csv_export import csv_response
from experiments.presentation.ranking_rule import default_ranking_metric
from experiments.selectors.ranking import (
    LEADERBOARD_COLUMNS,
    leaderboard,
    leaderboard_datasets,
    leaderboard_filter_choices,
    team_recorded_test_metrics,
)
from experiments.selectors.registry import models_registry_entries
from experiments.services.ranking import RankingError, team_set_ranking_metric
from experiments.tuning.bounds import parse_id
from experiments.views.access import forbidden, team_required

PAGE_SIZE = 50


def _int_or_none(value: str) -> int | None:
    return parse_id(value)


def _date_or_none(value: str) -> date | None:
    try:
        return date.fromisoformat(value) if value else None
    except ValueError:
        return None


def _change_ranking(request, recorded: list[str]):
    """An editor's POST of the team's ranking metric; back to the same view of the board."""
    if not request.membership.can_edit:
        return forbidden(request, "Viewers cannot change how the team ranks models; ask an owner for the editor role.")
    try:
        team_set_ranking_metric(team=request.team, metric=request.POST.get("ranking_metric", ""), recorded=recorded)
    except RankingError as exc:
        messages.error(request, str(exc))
    else:
        chosen = request.team.ranking_metric
        messages.success(request, f"The team now ranks models by test {chosen}." if chosen else
                         "The team now ranks models by the default: test accuracy for classification, test loss "
                         "for regression.")
    return redirect(request.get_full_path())


@team_required
def leaderboard_view(request):
    """Models and ensembles of one dataset, best first; every filter is a GET parameter, so a
    view can be bookmarked and shared. Editors choose here the team's ranking metric (POST)."""
    recorded = team_recorded_test_metrics(team=request.team)
    if request.method == "POST":
        return _change_ranking(request, recorded)
    datasets = leaderboard_datasets(team=request.team)
    chosen = next((d for d in datasets if str(d.id) == request.GET.get("dataset")), datasets[0] if datasets else None)
    defaults = f"test {default_ranking_metric('classification')} for classification, " \
               f"test {default_ranking_metric('regression')} for regression"
    context = {"datasets": datasets, "dataset": chosen, "params": request.GET,
               "ranking_form": RankingForm(initial={"ranking_metric": request.team.ranking_metric},
                                           recorded=sorted({*recorded, *filter(None, [request.team.ranking_metric])}),
                                           defaults=defaults)}
    if chosen is not None:
        direction = request.GET.get("dir")
        board = leaderboard(
            team=request.team, dataset=chosen, study_id=_int_or_none(request.GET.get("study", "")),
            hypermodel=request.GET.get("hypermodel", ""), author_id=_int_or_none(request.GET.get("author", "")),
            since=_date_or_none(request.GET.get("since", "")), until=_date_or_none(request.GET.get("until", "")),
            sort=request.GET.get("sort", "test"), descending=None if direction is None else direction == "desc",
        )
        if request.GET.get("format") == "csv":
            return leaderboard_csv(chosen, board)
        # Rendering is what costs at scale (a row is ~20 cells): show a page of rows; the CSV
        # has them all.
        paginator = Paginator(board["rows"], PAGE_SIZE)
        page = paginator.get_page(request.GET.get("page"))
        labels = {"test": f"Test {board['metric']}", "val": f"Validation {board['metric']} (source)", "name": "Model",
                  "kind": "Made by", "study": "Study", "hypermodel": "Hypermodel", "author": "Author",
                  "created": "Created", "device_seconds": "Device time"}
        context.update(board, page=page, rows=page.object_list, total=paginator.count,
                       sort_columns=[(c, labels[c]) for c in LEADERBOARD_COLUMNS] + [
                           (f"hp:{n}", n) for n in board["hp_names"]],
                       **leaderboard_filter_choices(team=request.team, dataset=chosen),
                       registry_entries=models_registry_entries(model_ids=[row["id"] for row in page.object_list]))
    return render(request, "leaderboard/leaderboard.html", context)


def leaderboard_csv(dataset: Dataset, board: dict):
    metric = board["metric"]
    header = ["rank", "model", "version", "made_by", f"test_{metric}", f"val_{metric}", "val_source", "study",
              "hypermodel", "author", "created", "warning", "device_seconds", *board["hp_names"]]
    rows = ([row["rank"], row["model_name"], row["version"], row["kind"], row["test"], row["val"], row["val_source"],
             row["study"], row["hypermodel"], row["author"], row["created"].isoformat(), row["warning"],
             "" if row["device_seconds"] is None else row["device_seconds"],
             *[row["hp"].get(n, "") for n in board["hp_names"]]]
            for row in board["rows"])
    return csv_response(f"leaderboard-{dataset.name}.csv", header, rows)
