"""{% serving_panel %}: the team's serving folder and last export, on any page of the registry
(it reads what it shows itself, so the page's own view need not)."""

from django import template
from django.urls import reverse

from experiments.presentation.serving_reports import serving_reason_label, serving_report_lines
from experiments.selectors.serving_exports import serving_status
from experiments.services.job_kinds import SERVING_EXPORT_QUEUE

register = template.Library()


@register.inclusion_tag("registry/_serving_panel.html", takes_context=True)
def serving_panel(context) -> dict:
    request = context["request"]
    status = serving_status(team=request.team)
    shown = status["last_finished"]
    registered = context.get("registered")
    # "Export now" leads back to the page the panel is on, also when htmx fetched it alone.
    back = reverse("registry_detail", args=[registered.id]) if registered else reverse("registry_serving")
    return {**status, "request": request, "csrf_token": context.get("csrf_token"), "queue": SERVING_EXPORT_QUEUE,
            "can_edit": request.membership.can_edit, "registered": registered, "back": back,
            "report_lines": serving_report_lines(shown.report if shown else {}),
            "last_reason": serving_reason_label(status["last"].reason) if status["last"] else ""}
