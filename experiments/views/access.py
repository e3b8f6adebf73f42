from functools import wraps

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, render

from experiments.models import Dataset, Study, TrainedModel, Trial
from experiments.selectors import invitations_for_user


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


def get_dataset_for_user(request, dataset_id: int) -> Dataset:
    return get_object_or_404(Dataset, pk=dataset_id, team=request.team)


def get_study_for_user(request, study_id: int) -> Study:
    return get_object_or_404(Study.objects.select_related("dataset"), pk=study_id, team=request.team)


def get_studies_for_user(request, study_ids: list[int]) -> list[Study]:
    """The studies in the order given; 404 if any is not the current team's."""
    # The oracle state may be large and nothing here reads it.
    studies = Study.objects.select_related("dataset").defer("oracle_state").filter(pk__in=study_ids, team=request.team)
    found = {s.pk: s for s in studies}
    if len(found) != len(set(study_ids)):
        raise Http404("No such study in this team.")
    return [found[pk] for pk in study_ids]


def get_trial_for_user(request, study_id: int, trial_pk: int) -> Trial:
    return get_object_or_404(Trial.objects.select_related("study"), pk=trial_pk, study_id=study_id,
                             study__team=request.team)


def get_model_for_user(request, model_id: int) -> TrainedModel:
    return get_object_or_404(TrainedModel.objects.select_related("study", "trial", "dataset", "team"),
                             pk=model_id, team=request.team)
