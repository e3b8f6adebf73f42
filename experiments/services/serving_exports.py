"""Serving exports: jobs writing the TF Serving layout of a team's registered models.
(Placeholder signature; the serving work fills it in.)"""

from experiments.models import ServingExport, Team


def serving_export_request(*, team: Team, reason: str, user=None) -> ServingExport | None:
    """Queue an export of the team's registry to its serving folder (after the current
    transaction commits). Called on demand and by every alias move."""
    return None
