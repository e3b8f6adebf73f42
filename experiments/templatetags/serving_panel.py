"""{% serving_panel %}: the team's serving folder and last export, on any page of the registry
(it reads what it shows itself, so the page's own view need not)."""

from django import template

from experiments.presentation.serving_reports import serving_reason_label, serving_report_lines
from experiments.selectors.serving_exports import serving_status
from experiments.services.serving_exports import SERVING_EXPORT_QUEUE

register = template.Library()


@register.inclusion_tag("registry/_serving_panel.html", takes_context=True)
def serving_panel(context) -> dict:
    request = context["request"]
    status = serving_status(team=request.team)
    shown = status["last_finished"]
    return {**status, "request": request, "csrf_token": context.get("csrf_token"), "queue": SERVING_EXPORT_QUEUE,
            "can_edit": request.membership.can_edit, "registered": context.get("registered"),
            "report_lines": serving_report_lines(shown.report if shown else {}),
            "last_reason": serving_reason_label(status["last"].reason) if status["last"] else ""}
