"""The queue page: what runs on an accelerator queue, what waits in claim order and why; a site
admin also sets each team's share and quotas there."""

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from experiments.forms.queues import QueuePolicyForm
from experiments.models import Study
from experiments.selectors.queue_board import queue_board
from experiments.services.fair_share import PolicyError, queue_policy_set
from experiments.views.access import forbidden, queue_or_404, team_required


@team_required
def queue_detail(request, queue: str):
    queue = queue_or_404(queue)
    site_admin = request.user.is_staff
    board = queue_board(queue=queue, team=request.team, site_admin=site_admin)
    return render(request, "fleet/queue.html", {"board": board, "queues": Study.Queue.choices,
                                                "policy_form": QueuePolicyForm() if site_admin else None})


@require_POST
@team_required
def queue_policy_view(request, queue: str):
    queue = queue_or_404(queue)
    if not request.user.is_staff:
        return forbidden(request, "Only a site admin sets teams' shares and quotas.")
    form = QueuePolicyForm(request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(e for errors in form.errors.values() for e in errors))
        return redirect("queue_detail", queue=queue)
    data = form.cleaned_data
    try:
        queue_policy_set(team=data["team"], queue=queue, weight=data["weight"], max_concurrent=data["max_concurrent"],
                         device_hours_per_month=data["device_hours_per_month"], user=request.user)
    except PolicyError as exc:
        messages.error(request, " ".join(exc.args[0].values()))
    else:
        messages.success(request, f"{data['team']}'s share and quotas on the {queue.upper()} queue are set.")
    return redirect("queue_detail", queue=queue)
