"""Teams, their members and invitations: every write about who may see and change a team.

The rule that holds throughout: a team always keeps at least one owner, so someone can
always add people, change roles and remove them."""

import hashlib
import logging
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.utils import timezone

from experiments.errors import TuneboardError
from experiments.models import Invitation, Membership, Team
from experiments.selectors.teams import invitations_for_user

User = get_user_model()
log = logging.getLogger(__name__)

TEAM_NAME_MAX = Team._meta.get_field("name").max_length
# Backends that do not deliver: with them the owner copies the link instead.
UNDELIVERED_MAIL_BACKENDS = {
    "django.core.mail.backends.console.EmailBackend",
    "django.core.mail.backends.dummy.EmailBackend",
}


class TeamError(TuneboardError):
    """A team change that is not allowed; str(exc) says why and what to do instead."""


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


def _clean_team_name(name: str) -> str:
    name = " ".join((name or "").split())
    if not name:
        raise TeamError("Give the team a name.")
    if len(name) > TEAM_NAME_MAX:
        raise TeamError(f"A team name has at most {TEAM_NAME_MAX} characters.")
    return name


@transaction.atomic
def team_create(*, name: str, owner=None) -> Team:
    name = _clean_team_name(name)
    if Team.objects.filter(name__iexact=name).exists():
        raise TeamError(f"A team named {name} already exists: pick another name, or ask its owner to add you.")
    team = Team.objects.create(name=name)
    if owner is not None:
        Membership.objects.create(user=owner, team=team, role=Membership.Role.OWNER)
    return team


@transaction.atomic
def team_add_owner(*, name: str, user) -> tuple[Team, bool]:
    """Make `user` an owner of the team called `name`, creating the team if needed.
    Returns the team and whether it was created."""
    name = _clean_team_name(name)
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
    _check_role(role)
    existing = Membership.objects.filter(team=team, user=user).first()
    if existing is not None:  # membership_set_role takes the team lock and keeps the last owner
        return membership_set_role(membership=existing, role=role)
    return Membership.objects.create(team=team, user=user, role=role)


def _check_role(role: str) -> str:
    if role not in Membership.Role.values:
        raise TeamError(f"Unknown role {role!r}: choose owner, editor or viewer.")
    return role


@transaction.atomic
def membership_set_role(*, membership: Membership, role: str) -> Membership:
    _check_role(role)
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


def invitation_invite(*, team: Team, identifier: str, role: str, invited_by) -> Invited:
    """Invite whoever `identifier` names: an e-mail address, or else a username. Nobody is added:
    the invitee joins only by accepting. The answer is the same whether or not an account has that
    address or username, so the form tells nobody who has an account here."""
    _check_role(role)
    identifier = " ".join((identifier or "").split())
    if not identifier:
        raise TeamError("Enter the person's e-mail address or username.")
    if len(identifier) > 254:
        raise TeamError("That is too long for an e-mail address or a username.")
    if "@" in identifier:
        email, username = _checked_email(identifier), ""
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


def _checked_email(email: str) -> str:
    email = email.strip()
    try:
        validate_email(email)
    except ValidationError:
        raise TeamError(f"{email} is not an e-mail address.") from None
    return email


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@transaction.atomic
def invitation_create(*, team: Team, role: str, created_by, email: str = "", username: str = "",
                      days: int | None = None) -> tuple[Invitation, str]:
    """A new invitation and its token. An earlier open invitation of the same invitee to the same
    team is replaced, so only the newest link works."""
    _check_role(role)
    email = _checked_email(email) if email else ""
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


def membership_choose(*, membership: Membership) -> Membership:
    """The user chose this team: it is the one a new login opens."""
    membership.last_chosen = timezone.now()
    Membership.objects.filter(pk=membership.pk).update(last_chosen=membership.last_chosen)
    return membership


def mail_delivers() -> bool:
    return settings.EMAIL_BACKEND not in UNDELIVERED_MAIL_BACKENDS


def invitation_send_email(*, invitation: Invitation, link: str) -> str:
    """Mail the invitee, when a delivering backend is configured: the address invited, or the
    address of the account a username invitation names (if it has one). Returns a sentence for the
    owner. What it says never depends on whether an account exists: a username invitation's mail
    goes out (or fails) silently, as it would for a username nobody has."""
    if not mail_delivers():
        return "No mail server is configured, so pass the link below on yourself."
    if invitation.email:
        recipients, how = [invitation.email], f"Open this link to sign up or log in and accept:\n{link}"
    else:
        account = User.objects.filter(username__iexact=invitation.username, is_active=True).first()
        recipients = [account.email] if account is not None and account.email else []
        how = f"Log in as {invitation.username} and accept it on your dashboard, or open:\n{link}"
    inviter = invitation.created_by.get_username() if invitation.created_by else "An owner"
    try:
        if recipients:
            send_mail(
                subject=f"Invitation to {invitation.team.name} on Tuneboard",
                message=(f"{inviter} invites you to the team {invitation.team.name} on Tuneboard as "
                         f"{invitation.role}. You join only if you accept.\n\n{how}\n\n"
                         f"The invitation expires on {invitation.expires:%Y-%m-%d %H:%M} UTC.\n"),
                from_email=None, recipient_list=recipients, fail_silently=False,
            )
    except Exception as exc:  # SMTP, DNS, TLS and socket errors all mean the same to the owner
        log.warning("could not e-mail invitation %s: %s", invitation.pk, type(exc).__name__)
        if invitation.email:
            return f"E-mailing {invitation.email} failed: pass the link below on yourself."
    if invitation.email:
        return f"It was e-mailed to {invitation.email}; the link is also below."
    return "Its link is below, for you to pass on if you like."


def account_create(*, username: str, password: str, email: str = ""):
    """A plain account (no staff rights). The caller validates the password."""
    username = (username or "").strip()
    if not username:
        raise TeamError("Choose a username.")
    if User.objects.filter(username__iexact=username).exists():
        raise TeamError(f"The username {username} is taken: choose another.")
    email = _checked_email(email) if email else ""
    try:
        with transaction.atomic():
            return User.objects.create_user(username=username, email=email, password=password)
    except IntegrityError:  # taken between the check and the insert
        raise TeamError(f"The username {username} is taken: choose another.") from None
