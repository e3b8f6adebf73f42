"""The audit log (django-auditlog's entries with a team)."""

from auditlog.models import AbstractLogEntry
from django.db import models

from experiments.models.teams import Team


class AuditEvent(AbstractLogEntry):
    """Who changed what in which team, from which address: django-auditlog's log entry (its
    changes, actor, address, correlation id) with the team and a verb to filter on. Written in the
    transaction of the change it records, so a change that rolls back leaves no row."""

    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    # "<object>.<what>": membership.create, invitation.accept, study.cancel, model.download, ...
    verb = models.CharField(max_length=40, db_index=True)

    class Meta(AbstractLogEntry.Meta):
        verbose_name = "audit event"
        verbose_name_plural = "audit events"
        indexes = [models.Index(fields=["team", "-timestamp"], name="audit_team_time")]

    @property
    def change_summary(self) -> str:
        """"role: viewer → editor; …" for a change, "format: keras" for an action's details."""
        parts = []
        for name, value in (self.changes if isinstance(self.changes, dict) else {}).items():
            if isinstance(value, list) and len(value) == 2:
                old, new = ("—" if v in (None, "", "None") else v for v in value)
                parts.append(f"{name}: {new}" if self.action == self.Action.CREATE else
                             f"{name}: {old}" if self.action == self.Action.DELETE else f"{name}: {old} → {new}")
            else:
                parts.append(f"{name}: {value}")
        return "; ".join(parts)
