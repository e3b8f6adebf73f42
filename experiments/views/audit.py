"""The team's audit log on the team page (owners only): filter by person, action and date."""

from django.conf import settings
from django.core.paginator import Paginator

from experiments.forms.audit import AuditFilterForm
from experiments.selectors.audit import team_audit_events
from experiments.services.audit import VERB_LABELS

AUDIT_PAGE_SIZE = 50


def audit_context(request) -> dict:
    """The team page's audit section: the filters from the query string, and one page of rows."""
    params = {key: request.GET[key] for key in ("actor", "action", "since", "until") if request.GET.get(key)}
    form = AuditFilterForm(params or None, team=request.team)
    rows = form.events(request.team) if not params or form.is_valid() else team_audit_events(team=request.team)[:0]
    page = Paginator(rows, AUDIT_PAGE_SIZE).get_page(request.GET.get("audit_page"))
    for event in page:
        event.label = VERB_LABELS.get(event.verb, event.verb)
    return {"audit_form": form, "audit_page": page, "audit_filtered": bool(params),
            "audit_days": settings.AUDIT_DAYS}
