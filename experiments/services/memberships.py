"""Memberships: who belongs to a team and with which role. The rule that holds throughout: a team
always keeps at least one owner, so someone can always add people, change roles and remove them."""

from django.db import transaction
from django.utils import timezone

from experiments.models import Membership, Team
from experiments.services.teams import TeamError, team_create, team_name_cleaned


@transaction.atomic
def team_add_owner(*, name: str, user) -> tuple[Team, bool]:
    """Make `user` an owner of the team called `name`, creating the team if needed.
    Returns the team and whether it was created."""
    name = team_name_cleaned(name)
    team = Team.objects.filter(name__iexact=name).first()
    if team is None:
        return team_create(name=name, owner=user), True
    membership_add(team=team, user=user, role=Membership.Role.OWNER)
    return team, False


def _lock_team(membership: Membership) -> Membership:
    """Serialise changes to one team's members (two owners demoting each other at once must not
    both succeed) and re-read the membership under the lock."""
    Team.objects.select_for_update().filter(pk=membership.team_id).first()
    current = Membership.objects.select_related("team", "user").filter(pk=membership.pk).first()
    if current is None:
        raise TeamError(f"{membership.user.get_username()} is no longer a member of {membership.team.name}.")
    return current


def _refuse_if_last_owner(membership: Membership, message: str) -> None:
    others = Membership.objects.filter(team_id=membership.team_id, role=Membership.Role.OWNER).exclude(pk=membership.pk)
    if membership.role == Membership.Role.OWNER and not others.exists():
        raise TeamError(message)


def _last_owner_message(membership: Membership, what: str) -> str:
    return (f"{membership.user.get_username()} is the last owner of {membership.team.name} and cannot {what}: "
            "make another member an owner first.")


@transaction.atomic
def membership_add(*, team: Team, user, role: str = Membership.Role.EDITOR) -> Membership:
    """Add `user` to `team` with `role`, or change the role of an existing member."""
    role_checked(role)
    existing = Membership.objects.filter(team=team, user=user).first()
    if existing is not None:  # membership_set_role takes the team lock and keeps the last owner
        return membership_set_role(membership=existing, role=role)
    return Membership.objects.create(team=team, user=user, role=role)


def role_checked(role: str) -> str:
    if role not in Membership.Role.values:
        raise TeamError(f"Unknown role {role!r}: choose owner, editor or viewer.")
    return role


@transaction.atomic
def membership_set_role(*, membership: Membership, role: str) -> Membership:
    role_checked(role)
    membership = _lock_team(membership)
    if role != membership.role:
        if role != Membership.Role.OWNER:
            _refuse_if_last_owner(membership, _last_owner_message(membership, f"become {role}"))
        membership.role = role
        membership.save(update_fields=["role"])
    return membership


@transaction.atomic
def membership_remove(*, membership: Membership) -> None:
    membership = _lock_team(membership)
    _refuse_if_last_owner(membership, _last_owner_message(membership, "be removed"))
    membership.delete()


@transaction.atomic
def membership_leave(*, team: Team, user) -> None:
    membership = Membership.objects.filter(team=team, user=user).select_related("team", "user").first()
    if membership is None:
        raise TeamError(f"You are not a member of {team.name}.")
    membership = _lock_team(membership)
    _refuse_if_last_owner(membership, f"You are the last owner of {team.name}: make another member an owner "
                                      "before you leave.")
    membership.delete()


def membership_choose(*, membership: Membership) -> Membership:
    """The user chose this team: it is the one a new login opens."""
    membership.last_chosen = timezone.now()
    Membership.objects.filter(pk=membership.pk).update(last_chosen=membership.last_chosen)
    return membership
