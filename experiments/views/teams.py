from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from experiments.middleware import SESSION_KEY
from experiments.models import Membership, Study
from experiments.selectors import dashboard_data
from experiments.views.access import team_required


@login_required
@require_POST
def switch_team(request):
    try:
        team_id = int(request.POST.get("team", ""))
    except ValueError:  # a tampered or empty value: no such team, not a server error
        raise Http404("No such team.") from None
    membership = Membership.objects.filter(user=request.user, team_id=team_id).first()
    if membership is None:
        raise Http404("No such team.")
    request.session[SESSION_KEY] = membership.team_id
    return redirect("dashboard")


@team_required
def dashboard(request):
    studies = Study.objects.filter(team=request.team).select_related("dataset").order_by("-created")[:10]
    return render(request, "dashboard.html", {"studies": studies, **dashboard_data(team=request.team)})
