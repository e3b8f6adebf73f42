"""The registry's serving panel: the team's TF Serving folder, its last export followed live, and Export now (the
same export every alias move queues)."""

from django.contrib import messages
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from experiments.services.serving_exports import serving_export_request
from experiments.tuning.bounds import parse_id
from experiments.views.access import editor_required, team_required
from experiments.views.registry import get_registered_model_for_user


@team_required
def serving_view(request):
    return render(request, "registry/serving.html")


@team_required
def serving_live(request):
    """The serving panel, which htmx refreshes while an export waits or runs; `?registered=<id>`:
    the panel of that registered model's page (its REST line names the model)."""
    registered = None
    if "registered" in request.GET:  # a malformed id is as unknown as another team's
        registered = get_registered_model_for_user(request, parse_id(request.GET["registered"]) or 0)
    return render(request, "registry/_serving.html", {"registered": registered})


@editor_required  # first: an anonymous visitor is sent to log in, whatever the method
@require_POST
def serving_export_view(request):
    export = serving_export_request(team=request.team, reason="manual", user=request.user)
    messages.success(request, f"Serving export {export.pk} queued: a worker of the cpu queue writes the team's "
                              "registry into its serving folder.")
    # Back to the page the button is on (a registered model's page), else the serving page.
    back = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()},
                                       require_https=request.is_secure()):
        return redirect(back)
    return redirect("registry_serving")
