"""Reads of the team's datasets."""

from django.db.models import QuerySet

from experiments.models import Dataset, Team


def team_datasets(*, team: Team) -> QuerySet[Dataset]:
    return Dataset.objects.filter(team=team).order_by("-created")


def team_dataset(*, team: Team, dataset_id: int) -> Dataset | None:
    return Dataset.objects.filter(pk=dataset_id, team=team).first()
