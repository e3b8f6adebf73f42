from django.contrib.auth import get_user_model
from django.db import transaction

from experiments.models import Membership, Team

User = get_user_model()


@transaction.atomic
def team_create(*, name: str, owner=None) -> Team:
    team = Team.objects.create(name=name)
    if owner is not None:
        Membership.objects.create(user=owner, team=team, role=Membership.Role.OWNER)
    return team


def membership_add(*, team: Team, user, role: str = Membership.Role.EDITOR) -> Membership:
    membership, _ = Membership.objects.update_or_create(team=team, user=user, defaults={"role": role})
    return membership
