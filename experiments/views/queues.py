"""The queue page: what runs on an accelerator queue, what waits in claim order and why; a site
admin also sets each team's share and quotas there."""

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from experiments.forms.queues import QueuePolicyForm
from experiments.models import Study
from experiments.selectors.fair_share import queue_policies
from experiments.selectors.queue_board import queue_board
from experiments.services.fair_share import queue_policy_set
from experiments.services.job_kinds import JOB_KINDS
from experiments.views.access import forbidden, queue_or_404, team_required


@team_required
def queue_detail(request, queue: str):
    queue = queue_or_404(queue)
    site_admin = request.user.is_staff
    board = queue_board(queue=queue, team=request.team, kinds=JOB_KINDS.values(), site_admin=site_admin)
    return render(request, "fleet/queue.html", {"board": board, "queues": Study.Queue.choices,
                                                "policy_forms": _policy_forms(queue) if site_admin else None})


def _policy_forms(queue: str) -> list[QueuePolicyForm]:
    """One form per team, prefilled with what is set now (a re-save changes only what was edited)."""
    forms = []
    for team, policy in queue_policies(queue=queue):
        initial = {"team": team.pk, "weight": 1.0} if policy is None else {
            "team": team.pk, "weight": policy.weight, "max_concurrent": policy.max_concurrent,
            "device_hours_per_month": policy.device_hours_per_month}
        forms.append(QueuePolicyForm(queue=queue, row_of=team, initial=initial))
    return forms


@require_POST
@team_required
def queue_policy_view(request, queue: str):
    queue = queue_or_404(queue)
    if not request.user.is_staff:
        return forbidden(request, "Only a site admin sets teams' shares and quotas.")
    form = QueuePolicyForm(request.POST, queue=queue)
    if not form.is_valid():
        team = form.cleaned_data.get("team")
        problems = "; ".join(f"{form[name].label if name in form.fields else 'Queue'}: {' '.join(errors)}"
                             for name, errors in form.errors.items())
        messages.error(request, f"{team or 'The team'}'s share and quotas were not changed. {problems}")
        return redirect("queue_detail", queue=queue)
    data = form.cleaned_data
    queue_policy_set(team=data["team"], queue=queue, weight=data["weight"], max_concurrent=data["max_concurrent"],
                     device_hours_per_month=data["device_hours_per_month"], user=request.user)
    messages.success(request, f"{data['team']}'s share and quotas on the {queue.upper()} queue are set.")
    return redirect("queue_detail", queue=queue)
