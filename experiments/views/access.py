from functools import wraps

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import render

from experiments.models import Dataset, Study, TrainedModel, Trial
from experiments.selectors.datasets import team_dataset
from experiments.selectors.studies import team_studies_by_id, team_study
from experiments.selectors.teams import invitations_for_user
from experiments.selectors.trained_models import team_model
from experiments.selectors.trials import team_trial


def team_required(view):
    """Logged in and a member of some team; the current team is request.team."""

    @login_required
    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if request.team is None:
            return render(request, "no_team.html", {"invitations": invitations_for_user(user=request.user)})
        return view(request, *args, **kwargs)

    return wrapped


def forbidden(request, message: str) -> HttpResponse:
    """A 403 inside the site's layout, with the way back."""
    return render(request, "forbidden.html", {"message": message}, status=403)


def editor_required(view):
    """Viewers see everything in their team but cannot start, cancel or create."""

    @team_required
    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if not request.membership.can_edit:
            return forbidden(request, "Viewers cannot change anything in this team; ask an owner for the editor role.")
        return view(request, *args, **kwargs)

    return wrapped


def found_or_404(row, model):
    """The row a selector read, or the 404 get_object_or_404 would raise (same message)."""
    if row is None:
        raise Http404(f"No {model._meta.object_name} matches the given query.")
    return row


def queue_or_404(queue: str) -> str:
    """An accelerator queue named in a URL (the queue page and its API)."""
    if queue not in Study.Queue.values:
        raise Http404("No such queue.")
    return queue


def get_dataset_for_user(request, dataset_id: int) -> Dataset:
    return found_or_404(team_dataset(team=request.team, dataset_id=dataset_id), Dataset)


def get_study_for_user(request, study_id: int) -> Study:
    return found_or_404(team_study(team=request.team, study_id=study_id), Study)


def get_studies_for_user(request, study_ids: list[int]) -> list[Study]:
    """The studies in the order given; 404 if any is not the current team's."""
    found = team_studies_by_id(team=request.team, study_ids=study_ids)
    if len(found) != len(set(study_ids)):
        raise Http404("No such study in this team.")
    return [found[pk] for pk in study_ids]


def get_trial_for_user(request, study_id: int, trial_pk: int) -> Trial:
    return found_or_404(team_trial(team=request.team, study_id=study_id, trial_pk=trial_pk), Trial)


def get_model_for_user(request, model_id: int) -> TrainedModel:
    return found_or_404(team_model(team=request.team, model_id=model_id), TrainedModel)
