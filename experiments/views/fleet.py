from django.shortcuts import render

from experiments.selectors.fleet import fleet_rows
from experiments.services.job_kinds import JOB_KINDS
from experiments.views.access import team_required


@team_required
def worker_list(request):
    """The fleet is shared by every team; only the current team's trials are named."""
    rows = fleet_rows(team=request.team, kinds=JOB_KINDS.values())
    for row in rows:
        row["trials"] = [t for t in row["trials"] if t.study.team_id == request.team.id]
    return render(request, "fleet/workers.html", {"rows": rows})
