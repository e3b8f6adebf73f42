"""Notification pages: a user's e-mail choices (account menu), and the team's webhooks and
recent deliveries (on the team page; owners and editors manage webhooks)."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from experiments.forms.notifications import WebhookForm
from experiments.models import SUBSCRIBABLE_EVENTS, Webhook
from experiments.selectors.notifications import notification_preferences, team_deliveries
from experiments.selectors.webhooks import team_webhooks
from experiments.services.notifications import NotificationError, notification_preferences_save, notify_webhook_test
from experiments.services.webhooks import (
    webhook_create,
    webhook_delete,
    webhook_new_secret,
    webhook_update,
)
from experiments.views.access import editor_required

# A webhook's secret just made, shown once on the next team page and then forgotten.
NEW_SECRET_KEY = "new_webhook_secret"


def _get_webhook_for_user(request, webhook_id: int) -> Webhook:
    return get_object_or_404(Webhook, pk=webhook_id, team=request.team)


def _remember_secret(request, webhook: Webhook, secret: str) -> None:
    request.session[NEW_SECRET_KEY] = {"team_id": webhook.team_id, "webhook_id": webhook.pk, "name": webhook.name,
                                       "secret": secret}


def notifications_context(request) -> dict:
    """The team page's part: webhooks, recent deliveries, and a secret to show once."""
    can_manage = request.membership.can_edit
    new_secret = request.session.pop(NEW_SECRET_KEY, None)
    if not can_manage or (new_secret or {}).get("team_id") != request.team.id:
        new_secret = None
    return {"webhooks": team_webhooks(team=request.team), "deliveries": team_deliveries(team=request.team),
            "can_manage_webhooks": can_manage, "new_secret": new_secret,
            "notify_max_attempts": settings.NOTIFY_MAX_ATTEMPTS}


@editor_required
def webhook_new(request):
    form = WebhookForm(request.POST or None, initial={"active": True})
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        webhook, secret = webhook_create(team=request.team, user=request.user, name=data["name"], url=data["url"],
                                         events=data["events"], secret=data["secret"], active=data["active"])
        _remember_secret(request, webhook, secret)
        messages.success(request, f"Webhook {webhook.name} saved. Copy its secret now: it is shown only once.")
        return redirect("team_settings")
    return render(request, "teams/webhook_form.html", {"form": form, "webhook": None})


@editor_required
def webhook_edit(request, webhook_id: int):
    webhook = _get_webhook_for_user(request, webhook_id)
    initial = {"name": webhook.name, "url": webhook.url, "events": webhook.events, "active": webhook.active}
    form = WebhookForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        webhook_update(webhook=webhook, name=data["name"], url=data["url"], events=data["events"],
                       active=data["active"], secret=data["secret"])
        messages.success(request, f"Webhook {webhook.name} saved.")
        return redirect("team_settings")
    return render(request, "teams/webhook_form.html", {"form": form, "webhook": webhook})


@editor_required
@require_POST
def webhook_test(request, webhook_id: int):
    webhook = _get_webhook_for_user(request, webhook_id)
    try:
        notify_webhook_test(webhook=webhook, user=request.user)
    except NotificationError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"A test event is on its way to {webhook.name}; its delivery is listed below.")
    return redirect("team_settings")


@editor_required
@require_POST
def webhook_secret(request, webhook_id: int):
    webhook = _get_webhook_for_user(request, webhook_id)
    _remember_secret(request, webhook, webhook_new_secret(webhook=webhook))
    messages.success(request, f"Webhook {webhook.name} has a new secret; calls are signed with it from now on.")
    return redirect("team_settings")


@editor_required
@require_POST
def webhook_remove(request, webhook_id: int):
    webhook = _get_webhook_for_user(request, webhook_id)
    webhook_delete(webhook=webhook)
    messages.success(request, f"Webhook {webhook.name} was removed with its deliveries.")
    return redirect("team_settings")


@login_required
def notification_settings(request):
    """Which events of which of the user's teams reach them by e-mail (none until chosen)."""
    rows = notification_preferences(user=request.user)
    if request.method == "POST":
        choices = {row["team"].id: {"events": request.POST.getlist(f"events-{row['team'].id}"),
                                    "only_mine": request.POST.get(f"only_mine-{row['team'].id}") == "on"}
                   for row in rows}
        try:
            notification_preferences_save(user=request.user, choices=choices)
        except NotificationError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, "Your e-mail notifications are saved.")
            return redirect("notification_settings")
    return render(request, "account/notifications.html", {"rows": rows, "events": SUBSCRIBABLE_EVENTS})
