"""Notifications: who wants which events, webhooks, events and their deliveries."""

from django.conf import settings
from django.db import models
from django.utils import timezone

from experiments.models.teams import Team
from experiments.states import DeliveryStatus


class EventKind(models.TextChoices):
    STUDY_COMPLETED = "study.completed", "Study finished"
    STUDY_FAILED = "study.failed", "Study failed"
    MODEL_READY = "model.ready", "Model ready"
    ENSEMBLE_READY = "ensemble.ready", "Ensemble ready"
    WORKER_LOST = "worker.lost", "Worker lost"
    TEST = "test", "Test"


# What people can subscribe to (a test goes to the one webhook it was sent from).
SUBSCRIBABLE_EVENTS = [(kind.value, kind.label) for kind in EventKind if kind != EventKind.TEST]


class NotificationPreference(models.Model):
    """Which events of one team a user wants by e-mail. No row means none: e-mail is opt-in."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="notification_preferences")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    events = models.JSONField(default=list, blank=True)
    # Only studies and models this user created (and their lost trials).
    only_mine = models.BooleanField(default=False)
    updated = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "team"], name="one_preference_per_user_and_team")]


class Webhook(models.Model):
    """A team's receiver of events: Slack-compatible JSON, signed with the secret (HMAC-SHA256).

    The secret is kept as is, since signing needs it; it is shown once, when it is made."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="webhooks")
    name = models.CharField(max_length=100)
    url = models.URLField(max_length=500)
    secret = models.CharField(max_length=128)
    events = models.JSONField(default=list)
    active = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return self.name

    def get_additional_data(self) -> dict:
        return {"team": self.team_id}

    @property
    def display_url(self) -> str:
        """Scheme and host only: the path of a Slack webhook URL is itself a credential."""
        from urllib.parse import urlsplit

        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}/…"


class NotificationEvent(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=20, choices=EventKind.choices)
    text = models.TextField()
    # The webhook body as sent: Slack's "text" plus structured fields.
    payload = models.JSONField(default=dict)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created", "-id"]


class NotificationDelivery(models.Model):
    """One e-mail or webhook call of one event, tried until sent or out of attempts."""

    class Channel(models.TextChoices):
        EMAIL = "email", "E-mail"
        WEBHOOK = "webhook", "Webhook"

    Status = DeliveryStatus

    event = models.ForeignKey(NotificationEvent, on_delete=models.CASCADE, related_name="deliveries")
    channel = models.CharField(max_length=10, choices=Channel.choices)
    webhook = models.ForeignKey(Webhook, null=True, blank=True, on_delete=models.CASCADE, related_name="deliveries")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="+")
    # The e-mail address, or the webhook's name and host, as shown on the team page.
    target = models.CharField(max_length=300)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    response_code = models.PositiveIntegerField(null=True, blank=True)
    # When the next attempt is due; while one is under way, when it counts as lost.
    next_attempt = models.DateTimeField(null=True, blank=True)
    # When its task was last handed to the broker, and how often the sweep had to do it again.
    last_sent = models.DateTimeField(null=True, blank=True)
    resends = models.PositiveIntegerField(default=0)
    # One entry per attempt: {"at", "ok", "code", "error"}.
    history = models.JSONField(default=list, blank=True)
    created = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["status", "next_attempt"])]
