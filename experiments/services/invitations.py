"""Invitations: an owner invites someone by e-mail address or username with a one-time link; the
invitee joins only by accepting it (or signs up through it), and may decline."""

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from experiments.errors import TuneboardError
from experiments.models import Invitation, Membership, Team
from experiments.selectors.teams import invitations_for_user
from experiments.services.accounts import account_create, email_checked
from experiments.services.memberships import membership_choose, role_checked
from experiments.services.teams import TeamError


class InvitationError(TuneboardError):
    """An invitation that cannot be answered: unknown, withdrawn, replaced or someone else's
    (`status` 404), or used, declined or expired (410, gone for good)."""

    status = 404


class InvitationGone(InvitationError):
    status = 410


@dataclass(frozen=True)
class Invited:
    """An invitation just made, with its one-time `token` (the link is built from it and never
    stored)."""

    invitation: Invitation
    token: str


def invitation_invite(*, team: Team, identifier: str, role: str, invited_by) -> Invited:
    """Invite whoever `identifier` names: an e-mail address, or else a username. Nobody is added:
    the invitee joins only by accepting. The answer is the same whether or not an account has that
    address or username, so the form tells nobody who has an account here."""
    role_checked(role)
    identifier = " ".join((identifier or "").split())
    if not identifier:
        raise TeamError("Enter the person's e-mail address or username.")
    if len(identifier) > 254:
        raise TeamError("That is too long for an e-mail address or a username.")
    if "@" in identifier:
        email, username = email_checked(identifier), ""
        members = Membership.objects.filter(team=team, user__email__iexact=email)
    else:
        email, username = "", identifier
        members = Membership.objects.filter(team=team, user__username__iexact=username)
    # The owner sees the member list and its addresses anyway: saying so here reveals nothing new.
    if members.exists():
        raise TeamError(f"{identifier} is already a member of {team.name}: change their role in the member list.")
    invitation, token = invitation_create(team=team, email=email, username=username, role=role,
                                          created_by=invited_by)
    return Invited(invitation=invitation, token=token)


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@transaction.atomic
def invitation_create(*, team: Team, role: str, created_by, email: str = "", username: str = "",
                      days: int | None = None) -> tuple[Invitation, str]:
    """A new invitation and its token. An earlier open invitation of the same invitee to the same
    team is replaced, so only the newest link works."""
    role_checked(role)
    email = email_checked(email) if email else ""
    if not (email or username):
        raise TeamError("Enter the person's e-mail address or username.")
    same = {"email__iexact": email} if email else {"username__iexact": username}
    for old in Invitation.objects.filter(team=team, accepted_at__isnull=True, **same):
        old.delete()  # one by one, so the audit log records each replaced invitation
    token = secrets.token_urlsafe(32)
    invitation = Invitation.objects.create(
        team=team, email=email, username=username, role=role, token_hash=_hash(token), created_by=created_by,
        expires=timezone.now() + timedelta(days=days or settings.INVITATION_DAYS),
    )
    return invitation, token


def _open_invitation(invitation: Invitation | None) -> Invitation:
    if invitation is None:
        raise InvitationError("This invitation is not valid: it was mistyped, or the team's owner withdrew or "
                              "replaced it. Ask them for a new one.")
    if invitation.is_accepted:
        raise InvitationGone(f"This invitation to {invitation.team.name} has already been used. If you accepted "
                              "it, log in; otherwise ask the team's owner for a new one.")
    if invitation.is_declined:
        raise InvitationGone(f"This invitation to {invitation.team.name} was declined. Ask the team's owner for a "
                              "new one if you changed your mind.")
    if invitation.is_expired:
        raise InvitationGone(f"This invitation to {invitation.team.name} expired on "
                              f"{invitation.expires:%Y-%m-%d %H:%M} UTC. Ask the team's owner for a new one.")
    return invitation


def invitation_for_token(token: str) -> Invitation:
    """The open invitation behind a link, or InvitationError saying why the link does not work."""
    return _open_invitation(Invitation.objects.select_related("team", "created_by")
                            .filter(token_hash=_hash(token or "")).first())


def _locked_for(invitation: Invitation, user) -> Invitation:
    # Locked and checked again: two tabs answering the same invitation use it once.
    locked = _open_invitation(Invitation.objects.select_for_update().select_related("team")
                              .filter(pk=invitation.pk).first())
    if locked.username and not locked.is_for(user):
        raise InvitationError(f"This invitation is for the account {locked.username}: log in as {locked.username} "
                              "to answer it.")
    return locked


def _accept(invitation: Invitation, user) -> tuple[Membership, bool]:
    invitation.accepted_at = timezone.now()
    invitation.accepted_by = user
    invitation.save(update_fields=["accepted_at", "accepted_by"])
    membership, created = Membership.objects.get_or_create(team=invitation.team, user=user,
                                                           defaults={"role": invitation.role})
    membership_choose(membership=membership)
    return membership, created


@transaction.atomic
def invitation_accept(*, token: str, user) -> tuple[Membership, bool]:
    """Join the invitation's team with its role (the link's holder chose to). Returns the
    membership and whether it is new; someone already in the team keeps their role (an
    invitation never demotes)."""
    return _accept(_locked_for(invitation_for_token(token), user), user)


def _addressed_to(user, invitation_id: int) -> Invitation:
    invitation = next((i for i in invitations_for_user(user=user) if i.pk == invitation_id), None)
    if invitation is None:  # not theirs, answered, withdrawn or expired: all look the same
        raise InvitationError("No such open invitation for you: it may have been withdrawn, answered or expired.")
    return invitation


@transaction.atomic
def invitation_accept_mine(*, invitation_id: int, user) -> tuple[Membership, bool]:
    """Accept, from the dashboard, an invitation addressed to this account."""
    return _accept(_locked_for(_addressed_to(user, invitation_id), user), user)


@transaction.atomic
def invitation_decline(*, invitation_id: int, user) -> Invitation:
    """Decline an invitation addressed to this account: it stays listed for the owners as declined."""
    invitation = _locked_for(_addressed_to(user, invitation_id), user)
    invitation.declined_at = timezone.now()
    invitation.save(update_fields=["declined_at"])
    return invitation


@transaction.atomic
def invitation_sign_up(*, token: str, username: str, password: str):
    """Create the account (with the invited address) and join the team. The password is
    validated by the form; returns the new user and membership."""
    invitation = invitation_for_token(token)
    if not invitation.email:
        raise InvitationError(f"This invitation is for the existing account {invitation.username}: log in as "
                              f"{invitation.username} to answer it.")
    user = account_create(username=username, email=invitation.email, password=password)
    membership, _ = invitation_accept(token=token, user=user)
    return user, membership


@transaction.atomic
def invitation_withdraw(*, invitation: Invitation) -> None:
    invitation.delete()
