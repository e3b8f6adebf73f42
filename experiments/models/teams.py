"""Teams and who may act in them: members, invitations (accepted, never imposed), API tokens,
password-reset requests."""

from django.conf import settings
from django.db import models
from django.utils import timezone
from knox.models import AbstractAuthToken


class Team(models.Model):
    name = models.CharField(max_length=100, unique=True)
    created = models.DateTimeField(default=timezone.now)
    # The test metric the leaderboard and the dashboard rank models by (experiments/presentation/ranking_rule.py);
    # empty: accuracy for classification, the loss for regression.
    ranking_metric = models.CharField(max_length=50, blank=True, default="")

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner", "Owner"
        EDITOR = "editor", "Editor"
        VIEWER = "viewer", "Viewer"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.EDITOR)
    # When the user last chose this team (the switcher, accepting an invitation): with no team in
    # the session, a new login opens the one chosen last, else the oldest membership.
    last_chosen = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "team"], name="one_membership_per_team")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"

    @property
    def can_edit(self) -> bool:
        return self.role in (self.Role.OWNER, self.Role.EDITOR)

    @property
    def is_owner(self) -> bool:
        return self.role == self.Role.OWNER

    def get_additional_data(self) -> dict:
        return {"team": self.team_id}  # the audit log's team (django-auditlog calls this)


# Lowest first: a token acts with the lower of its own role and its user's.
ROLE_RANK = {Membership.Role.VIEWER: 0, Membership.Role.EDITOR: 1, Membership.Role.OWNER: 2}


def lower_role(a: str, b: str) -> str:
    return a if ROLE_RANK[a] <= ROLE_RANK[b] else b


class Invitation(models.Model):
    """An offer of a seat in a team that only the invitee's own click turns into a membership; only its token's sha256
    is kept, so a leaked database hands out no seats."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField(blank=True)
    username = models.CharField(max_length=150, blank=True)
    role = models.CharField(max_length=10, choices=Membership.Role.choices, default=Membership.Role.EDITOR)
    token_hash = models.CharField(max_length=64, unique=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(default=timezone.now)
    expires = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")
    declined_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        constraints = [models.CheckConstraint(condition=~models.Q(email="") | ~models.Q(username=""),
                                              name="invitation_names_someone")]

    def __str__(self) -> str:
        return f"{self.invitee} to {self.team} ({self.role})"

    @property
    def invitee(self) -> str:
        return self.email or self.username

    @property
    def is_accepted(self) -> bool:
        return self.accepted_at is not None

    @property
    def is_declined(self) -> bool:
        return self.declined_at is not None

    @property
    def is_expired(self) -> bool:
        return not self.is_accepted and timezone.now() >= self.expires

    def is_for(self, user) -> bool:
        """Whether `user`'s account is the one invited (its username, or its e-mail address)."""
        if self.username:
            return user.get_username().casefold() == self.username.casefold()
        return bool(user.email) and user.email.casefold() == self.email.casefold()

    def get_additional_data(self) -> dict:
        return {"team": self.team_id}


class ApiToken(AbstractAuthToken):
    """A personal API token (django-rest-knox): only its digest is stored; the token itself is
    shown once, when it is made. It acts for its user in one team, with at most `role` (and never
    more than the user's own role there, which is read on every request)."""

    name = models.CharField(max_length=100)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="api_tokens")
    role = models.CharField(max_length=10, choices=Membership.Role.choices, default=Membership.Role.EDITOR)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.name} ({self.token_key[:8]}…)"

    @property
    def is_expired(self) -> bool:
        return self.expiry is not None and timezone.now() >= self.expiry

    def get_additional_data(self) -> dict:
        return {"team": self.team_id}


class PasswordResetRequest(models.Model):
    """One request of /password/reset/ in the last hour (experiments/services/password_resets.py)."""

    email_digest = models.CharField(max_length=64, db_index=True)
    client = models.GenericIPAddressField(null=True, blank=True, db_index=True)
    created = models.DateTimeField(default=timezone.now, db_index=True)
    allowed = models.BooleanField()


class SsoIdentity(models.Model):
    """The identity provider's subject ("sub") an account signs in as: accounts are linked by it, never by an
    e-mail address (anyone can hold an account with any address)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sso_identity")
    subject = models.CharField(max_length=255, unique=True)
    created = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.user} as {self.subject}"
