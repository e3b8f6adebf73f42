"""Notifications: a team's events and who hears of them, recorded inside the change's transaction so a change
that rolls back notifies nobody (docs/design/job-lifecycle.md)."""

import logging
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from experiments.errors import TuneboardError
from experiments.models import (
    SUBSCRIBABLE_EVENTS,
    EventKind,
    Membership,
    NotificationDelivery,
    NotificationEvent,
    NotificationPreference,
    Study,
    Team,
    TrainedModel,
    Trial,
    Webhook,
)
from experiments.presentation.ranking_rule import default_ranking_metric
from experiments.selectors.studies import study_progress
from experiments.selectors.trials import study_best_trial
from experiments.services.notification_delivery import deliveries_enqueue

log = logging.getLogger(__name__)
MAX_TEXT = 600
SUBSCRIBABLE = {kind for kind, _ in SUBSCRIBABLE_EVENTS}


class NotificationError(TuneboardError, ValueError):
    pass


def _absolute(path: str) -> str:
    return f"{settings.SITE_URL}{path}"


def _clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


@dataclass
class Message:
    text: str
    path: str  # the page it is about, linked as TUNEBOARD_SITE_URL + path
    fields: dict  # structured fields of the webhook payload


def _subscribers(team_id: int, kind: str, owner_id: int | None) -> list:
    """Members who asked for this kind of event by e-mail (and, with only_mine, own the subject)."""
    members = Membership.objects.filter(team_id=team_id).values_list("user_id", flat=True)
    preferences = (NotificationPreference.objects.filter(team_id=team_id, user_id__in=members, user__is_active=True)
                   .exclude(user__email="").select_related("user"))
    # Filtered here, not with a JSON lookup: SQLite (the embedded mode) has no list containment.
    return [p.user for p in preferences if kind in p.events and (not p.only_mine or p.user_id == owner_id)]


def notify(*, team_id: int, kind: str, describe: Callable[[], Message], owner_id: int | None = None,
           webhooks: list[Webhook] | None = None) -> NotificationEvent | None:
    """Record one event and its deliveries in the caller's transaction. `webhooks` given: only
    those (a test call); otherwise every member who opted in and every active webhook that
    wants `kind`. `describe` runs only when someone listens; nobody listening, nothing is written."""
    try:
        with transaction.atomic():  # a savepoint: a failure here leaves the caller's work alone
            return _record(team_id, kind, describe, owner_id, webhooks)
    except Exception:
        log.exception("could not record the %s notification of team %s; the change it is about stands", kind,
                      team_id)
        return None


def _record(team_id, kind, describe, owner_id, webhooks) -> NotificationEvent | None:
    users = [] if webhooks is not None else _subscribers(team_id, kind, owner_id)
    if webhooks is None:
        webhooks = [hook for hook in Webhook.objects.filter(team_id=team_id, active=True) if kind in hook.events]
    if not users and not webhooks:
        return None
    message, team, now = describe(), Team.objects.get(pk=team_id), timezone.now()
    text, url = _clip(message.text), _absolute(message.path)
    payload = {"text": f"[{team.name}] {text} <{url}|Open in Tuneboard>", "event": kind,
               "team": {"id": team.pk, "name": team.name}, **message.fields, "url": url, "created": now.isoformat()}
    event = NotificationEvent.objects.create(team=team, kind=kind, text=text, payload=payload, created=now)
    rows = [NotificationDelivery(event=event, channel=NotificationDelivery.Channel.EMAIL, user=user,
                                 target=user.email, next_attempt=now, last_sent=now, created=now) for user in users]
    rows += [NotificationDelivery(event=event, channel=NotificationDelivery.Channel.WEBHOOK, webhook=hook,
                                  target=f"{hook.name} ({hook.display_url})", next_attempt=now, last_sent=now,
                                  created=now) for hook in webhooks]
    deliveries_enqueue(delivery_pks=[row.pk for row in NotificationDelivery.objects.bulk_create(rows)])
    return event


# --- the events ------------------------------------------------------------------------


def _study_fields(study: Study) -> dict:
    return {"id": study.pk, "name": study.name, "status": study.status}


def _study_ended(study: Study) -> Message:
    fields = _study_fields(study)
    if study.status != Study.Status.COMPLETED:
        return Message(f"Study “{study.name}” failed: {study.message}", reverse("study_detail", args=[study.pk]),
                       {"study": {**fields, "message": study.message}})
    best = study_best_trial(study=study)
    completed = study_progress(study=study)["completed"]
    fields.update(objective=study.objective_metric, direction=study.objective_direction, trials_completed=completed,
                  best_score=best.score if best else None, best_trial=best.number if best else None)
    # "Trial N" as every page numbers trials (1-based start order), not KerasTuner's id.
    result = f"best {study.objective_metric} {best.score:.4g} (Trial {best.number})" if best else "no trial completed"
    if study.message:  # why it ended before its budget was spent (a stopping rule)
        fields["message"] = study.message
    trials = f"{completed} trial{'s' if completed != 1 else ''}"
    return Message(f"Study “{study.name}” finished: {trials} completed, {result}. {study.message}".strip(),
                   reverse("study_detail", args=[study.pk]), {"study": fields})


def notify_study_ended(*, study: Study) -> None:
    """A study COMPLETED (its tuner has nothing left, or a stopping rule was met) or FAILED (too many
    failures in a row)."""
    kind = EventKind.STUDY_COMPLETED if study.status == Study.Status.COMPLETED else EventKind.STUDY_FAILED
    notify(team_id=study.team_id, kind=kind, describe=lambda: _study_ended(study), owner_id=study.created_by_id)


def _model_ready(model_pk: int) -> Message:
    model = TrainedModel.objects.select_related("study", "dataset").get(pk=model_pk)
    metric = default_ranking_metric(model.dataset.task)
    value = (model.test_metrics or {}).get(metric)
    result = f": test {metric} {value:.4g}" if isinstance(value, int | float) else ""
    fields = {"model": {"id": model.pk, "name": model.name, "version": model.version, "kind": model.kind,
                        "method": model.method, "test_metrics": model.test_metrics,
                        "val_metrics": model.val_metrics}}
    if model.study_id:
        fields["study"] = {"id": model.study_id, "name": model.study.name}
    what = "Ensemble" if model.is_ensemble else "Model"
    return Message(f"{what} {model.name} v{model.version} is ready{result}.",
                   reverse("model_detail", args=[model.pk]), fields)


def notify_model_ready(*, model_pk: int) -> None:
    team_id, kind, owner_id = TrainedModel.objects.values_list("team_id", "kind", "created_by_id").get(pk=model_pk)
    notify(team_id=team_id, kind=EventKind.ENSEMBLE_READY if kind == TrainedModel.Kind.ENSEMBLE
           else EventKind.MODEL_READY, describe=lambda: _model_ready(model_pk), owner_id=owner_id)


def notify_trial_lost(*, trial: Trial, study: Study, runs_again: bool) -> None:
    worker = trial.worker_name or trial.worker_host or "running it"
    after = "it runs again" if runs_again else "it runs again when the study is resumed"
    notify(team_id=study.team_id, kind=EventKind.WORKER_LOST, owner_id=study.created_by_id, describe=lambda: Message(
        f"Worker {worker} stopped heartbeating: trial {trial.trial_id} of study “{study.name}” was lost; {after}.",
        reverse("trial_detail", args=[study.pk, trial.pk]),
        {"worker": worker, "study": _study_fields(study),
         "trial": {"id": trial.pk, "trial_id": trial.trial_id, "number": trial.number}}))


def notify_model_lost(*, model: TrainedModel, requeued: bool) -> None:
    worker = model.worker_host or "running it"
    after = "it was queued again" if requeued else f"it failed after {model.attempts} attempts"
    notify(team_id=model.team_id, kind=EventKind.WORKER_LOST, owner_id=model.created_by_id, describe=lambda: Message(
        f"Worker {worker} stopped heartbeating: model {model.name} v{model.version} was lost; {after}.",
        reverse("model_detail", args=[model.pk]),
        {"worker": worker, "model": {"id": model.pk, "name": model.name, "version": model.version,
                                     "kind": model.kind, "requeued": requeued}}))


def notify_webhook_test(*, webhook: Webhook, user) -> NotificationEvent:
    if not webhook.active:
        raise NotificationError(f"The webhook {webhook.name} is turned off; turn it on to send a test.")
    who = user.get_username() if user else "someone"
    event = notify(team_id=webhook.team_id, kind=EventKind.TEST, webhooks=[webhook], describe=lambda: Message(
        f"Test from Tuneboard, sent by {who}: this webhook works.", reverse("team_settings"),
        {"webhook": {"id": webhook.pk, "name": webhook.name}}))
    if event is None:
        raise NotificationError("The test could not be queued; see the server log.")
    return event


# --- preferences -----------------------------------------------------------------------


def notification_preferences_save(*, user, choices: dict[int, dict]) -> None:
    """`choices` = {team id: {"events": [...], "only_mine": bool}} for teams of the user.
    Everything is checked first; then all is saved, or nothing."""
    teams = set(Membership.objects.filter(user=user).values_list("team_id", flat=True))
    for team_id, choice in choices.items():
        if team_id not in teams:
            raise NotificationError("You can only choose notifications of your own teams.")
        unknown = set(choice["events"]) - SUBSCRIBABLE
        if unknown:
            raise NotificationError(f"Unknown event {sorted(unknown)[0]!r}; choose among "
                                    f"{', '.join(label for _, label in SUBSCRIBABLE_EVENTS)}.")
    with transaction.atomic():
        for team_id, choice in choices.items():
            NotificationPreference.objects.update_or_create(
                user=user, team_id=team_id,
                defaults={"events": [k for k, _ in SUBSCRIBABLE_EVENTS if k in choice["events"]],
                          "only_mine": bool(choice["only_mine"]), "updated": timezone.now()})
