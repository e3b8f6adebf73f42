"""Teams, their members and invitations: every write about who may see and change a team.

The rule that holds throughout: a team always keeps at least one owner, so someone can
always add people, change roles and remove them."""

import hashlib
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

User = get_user_model()

TEAM_NAME_MAX = Team._meta.get_field("name").max_length
# Backends that do not deliver: with them the owner copies the link instead.
UNDELIVERED_MAIL_BACKENDS = {
    "django.core.mail.backends.console.EmailBackend",
    "django.core.mail.backends.dummy.EmailBackend",
}


class TeamError(TuneboardError):
    """A team change that is not allowed; str(exc) says why and what to do instead."""


class InvitationError(TuneboardError):
    """An invitation link that does not work: unknown, withdrawn or replaced (`status` 404), or
    used or expired (410, gone for good)."""

    status = 404


class InvitationGone(InvitationError):
    status = 410


@dataclass(frozen=True)
class MemberAdded:
    """What adding someone did: a membership for an existing account, or else an invitation
    with its one-time `token` (the link is built from it and never stored)."""

    membership: Membership | None = None
    invitation: Invitation | None = None
    token: str = ""


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


def _user_by_username(username: str):
    # Exact first; a different case only when it names one account (sign-up keeps them unique).
    exact = User.objects.filter(username=username).first()
    if exact is not None:
        return exact
    folded = list(User.objects.filter(username__iexact=username)[:2])
    return folded[0] if len(folded) == 1 else None


def _users_with_email(email: str) -> list:
    return list(User.objects.filter(email__iexact=email, is_active=True)[:2])


@transaction.atomic
def member_add_or_invite(*, team: Team, identifier: str, role: str, invited_by) -> MemberAdded:
    """Add the account with this username or e-mail address; an address no account has
    gets an invitation instead."""
    _check_role(role)
    identifier = (identifier or "").strip()
    if not identifier:
        raise TeamError("Enter the person's username or e-mail address.")
    user = _user_by_username(identifier)
    if user is None and "@" in identifier:
        users = _users_with_email(identifier)
        if len(users) > 1:
            raise TeamError(f"Several accounts use {identifier}: add the person by username instead.")
        if not users:
            invitation, token = invitation_create(team=team, email=identifier, role=role, created_by=invited_by)
            return MemberAdded(invitation=invitation, token=token)
        user = users[0]
    if user is None:
        raise TeamError(f"No account has the username {identifier}. Check the spelling, or enter the "
                        "person's e-mail address to send them an invitation link.")
    existing = Membership.objects.filter(team=team, user=user).first()
    if existing is not None:
        raise TeamError(f"{user.get_username()} is already a member of {team.name} ({existing.role}): change their "
                        "role in the member list.")
    return MemberAdded(membership=Membership.objects.create(team=team, user=user, role=role))


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
def invitation_create(*, team: Team, email: str, role: str, created_by, days: int | None = None
                      ) -> tuple[Invitation, str]:
    """A new invitation and its token. An earlier open invitation of the same address to the
    same team is replaced, so only the newest link works."""
    _check_role(role)
    email = _checked_email(email)
    Invitation.objects.filter(team=team, email__iexact=email, accepted_at__isnull=True).delete()
    token = secrets.token_urlsafe(32)
    invitation = Invitation.objects.create(
        team=team, email=email, role=role, token_hash=_hash(token), created_by=created_by,
        expires=timezone.now() + timedelta(days=days or settings.INVITATION_DAYS),
    )
    return invitation, token


def invitation_for_token(token: str) -> Invitation:
    """The open invitation behind a link, or InvitationError saying why the link does not work."""
    invitation = Invitation.objects.select_related("team", "created_by").filter(token_hash=_hash(token or "")).first()
    if invitation is None:
        raise InvitationError("This invitation link is not valid: it was mistyped, or the team's owner withdrew or "
                              "replaced it. Ask them for a new link.")
    if invitation.is_accepted:
        raise InvitationGone(f"This invitation to {invitation.team.name} has already been used. If you accepted "
                              "it, log in; otherwise ask the team's owner for a new link.")
    if invitation.is_expired:
        raise InvitationGone(f"This invitation to {invitation.team.name} expired on "
                              f"{invitation.expires:%Y-%m-%d %H:%M} UTC. Ask the team's owner for a new link.")
    return invitation


@transaction.atomic
def invitation_accept(*, token: str, user) -> tuple[Membership, bool]:
    """Join the invitation's team with its role. Returns the membership and whether it is new;
    someone already in the team keeps their role (an invitation never demotes)."""
    found = invitation_for_token(token)
    # Locked and checked again: two tabs accepting the same link use it once.
    invitation = Invitation.objects.select_for_update().get(pk=found.pk)
    if invitation.accepted_at is not None:
        raise InvitationGone(f"This invitation to {found.team.name} has already been used.")
    invitation.accepted_at = timezone.now()
    invitation.accepted_by = user
    invitation.save(update_fields=["accepted_at", "accepted_by"])
    membership, created = Membership.objects.get_or_create(team=found.team, user=user,
                                                           defaults={"role": invitation.role})
    return membership, created


@transaction.atomic
def invitation_sign_up(*, token: str, username: str, password: str):
    """Create the account (with the invited address) and join the team. The password is
    validated by the form; returns the new user and membership."""
    invitation = invitation_for_token(token)
    user = account_create(username=username, email=invitation.email, password=password)
    membership, _ = invitation_accept(token=token, user=user)
    return user, membership


def invitation_withdraw(*, invitation: Invitation) -> None:
    invitation.delete()


def invitation_send_email(*, invitation: Invitation, link: str) -> str | None:
    """Mail the link when a delivering backend is configured. Returns None when sent, or a
    sentence saying why not, for the owner who must then pass the link on themselves."""
    if settings.EMAIL_BACKEND in UNDELIVERED_MAIL_BACKENDS:
        return "No mail server is configured (EMAIL_HOST), so nothing was e-mailed: send the link yourself."
    inviter = invitation.created_by.get_username() if invitation.created_by else "An owner"
    try:
        send_mail(
            subject=f"Join {invitation.team.name} on Tuneboard",
            message=(f"{inviter} invites you to the team {invitation.team.name} on Tuneboard as {invitation.role}.\n\n"
                     f"Open this link to sign up or log in and join:\n{link}\n\n"
                     f"The link works once and expires on {invitation.expires:%Y-%m-%d %H:%M} UTC.\n"),
            from_email=None, recipient_list=[invitation.email], fail_silently=False,
        )
    except Exception as exc:  # SMTP, DNS, TLS and socket errors all mean the same to the owner
        return f"E-mailing {invitation.email} failed ({type(exc).__name__}: {exc}): send the link yourself."
    return None


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
