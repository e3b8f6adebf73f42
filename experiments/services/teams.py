"""Teams: creating one (with its first owner), under a name nobody else's team has.
Who belongs to a team is services/memberships.py; joining one by invitation, services/invitations.py."""

from django.db import transaction

from experiments.errors import TuneboardError
from experiments.models import Membership, Team

TEAM_NAME_MAX = Team._meta.get_field("name").max_length


class TeamError(TuneboardError):
    """A team change that is not allowed; str(exc) says why and what to do instead."""


def team_name_cleaned(name: str) -> str:
    name = " ".join((name or "").split())
    if not name:
        raise TeamError("Give the team a name.")
    if len(name) > TEAM_NAME_MAX:
        raise TeamError(f"A team name has at most {TEAM_NAME_MAX} characters.")
    return name


@transaction.atomic
def team_create(*, name: str, owner=None) -> Team:
    name = team_name_cleaned(name)
    if Team.objects.filter(name__iexact=name).exists():
        raise TeamError(f"A team named {name} already exists: pick another name, or ask its owner to add you.")
    team = Team.objects.create(name=name)
    if owner is not None:
        Membership.objects.create(user=owner, team=team, role=Membership.Role.OWNER)
    return team
