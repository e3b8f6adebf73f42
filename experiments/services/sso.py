"""Single sign-on with OpenID Connect: mozilla-django-oidc does the protocol (authorization code,
the ID token's signature, the userinfo claims); this backend finds the account by the provider's
subject (never by e-mail: anyone can hold an account with any address) or makes one, gives the roles
the identity provider's groups map to, and records the login in the audit log."""

import logging
import re

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from experiments.models import ROLE_RANK, Invitation, Membership, SsoIdentity, Team
from experiments.services.audit import audit_record
from experiments.services.invitations import invitation_create
from experiments.services.memberships import membership_set_role
from experiments.services.teams import TeamError

log = logging.getLogger(__name__)


def _username(claims: dict) -> str:
    """A readable, unused username: the provider's preferred one, else the address's local part."""
    wanted = claims.get("preferred_username") or claims.get("email", "").partition("@")[0] or "user"
    base = re.sub(r"[^\w.@+-]", "", wanted)[:140] or "user"
    name, n = base, 1
    while get_user_model().objects.filter(username__iexact=name).exists():
        n += 1
        name = f"{base}{n}"
    return name


def sso_roles(groups) -> dict[str, str]:
    """Team name -> the highest role the user's groups map to (TUNEBOARD_OIDC_GROUP_ROLES)."""
    roles: dict[str, str] = {}
    for group, team, role in settings.SSO_GROUP_ROLES:
        if group in groups and ROLE_RANK[role] > ROLE_RANK.get(roles.get(team, ""), -1):
            roles[team] = role
    return roles


def sso_apply_groups(*, user, groups) -> None:
    """A member of a mapped team gets the role its groups map to (the audit log records the change);
    someone not yet a member is invited with it and joins by accepting, as anyone else does."""
    for team_name, role in sso_roles(groups).items():
        team = Team.objects.filter(name=team_name).first()
        if team is None:
            log.warning("TUNEBOARD_OIDC_GROUP_ROLES names team %r, which does not exist", team_name)
            continue
        membership = Membership.objects.filter(team=team, user=user).first()
        if membership is None:
            # One invitation, while none is open or was declined (declining is an answer; an owner's
            # own invitation stands).
            asked = Invitation.objects.filter(team=team, username__iexact=user.username).filter(
                declined_at__isnull=False) | Invitation.objects.filter(
                team=team, username__iexact=user.username, accepted_at__isnull=True, expires__gt=timezone.now())
            if not asked.exists():
                invitation_create(team=team, role=role, created_by=None, username=user.username)
        elif membership.role != role:
            try:
                membership_set_role(membership=membership, role=role)
            except TeamError as exc:  # the last owner keeps the role: the team is never left without one
                log.warning("single sign-on left %s's role in %s: %s", user, team, exc)


class SsoBackend(OIDCAuthenticationBackend):
    def verify_claims(self, claims) -> bool:
        return bool(claims.get("sub"))

    def filter_users_by_claims(self, claims):
        return get_user_model().objects.filter(sso_identity__subject=str(claims.get("sub")))

    def create_user(self, claims):
        with transaction.atomic():
            user = get_user_model().objects.create_user(username=_username(claims), email=_verified_email(claims))
            SsoIdentity.objects.create(user=user, subject=str(claims["sub"]))
        return self._signed_in(user, claims)

    def update_user(self, user, claims):
        email = _verified_email(claims)
        if email and email != user.email:
            user.email = email
            user.save(update_fields=["email"])
        return self._signed_in(user, claims)

    def _signed_in(self, user, claims):
        groups = claims.get(settings.SSO_GROUPS_CLAIM) or []
        sso_apply_groups(user=user, groups=groups if isinstance(groups, list) else [groups])
        for team_id in Membership.objects.filter(user=user).values_list("team_id", flat=True):
            audit_record(verb="sso.login", obj=user, team_id=team_id, actor=user,
                         changes={"provider": [None, settings.SSO_PROVIDER_NAME]})
        return user


def _verified_email(claims: dict) -> str:
    """The address only when the provider vouches for it: invitations by e-mail reach the account
    holding the address, so an unverified one must not be kept."""
    return claims.get("email", "") if claims.get("email_verified") is True else ""
