"""Events come from the lifecycle transitions themselves (a study finishing or failing, a model
or ensemble ready, a job lost with its worker), reach exactly those who asked for them, commit
with the change or not at all, and never break the change when notifying fails."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from experiments.models import (
    EventKind,
    Membership,
    NotificationDelivery,
    NotificationEvent,
    NotificationPreference,
    Study,
    TrainedModel,
    Trial,
)
from experiments.services import jobs, notifications, studies, trained_models, trial_claims, trial_reaper
from experiments.services.job_kinds import JOB_KINDS
from experiments.services.memberships import membership_add
from experiments.services.notification_delivery import deliveries_resend_due
from experiments.services.trained_models import trained_models_request
from experiments.services.trial_oracle import Claimant, Outcome
from experiments.services.webhooks import webhook_create
from workers.tuners.oracle import KerasTunerOracles

ORACLES = KerasTunerOracles()
pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings("ignore::DeprecationWarning:keras_tuner")]
ALL = [kind for kind in EventKind.values if kind != EventKind.TEST]


def claim(study, tuner="w"):
    return trial_claims.claim_trial(study_id=study.pk, claimant=Claimant(tuner_id=tuner, worker_host="h",
                                                                       worker_name="w1@h"), oracles=ORACLES)


def finish(trial, status="completed", score=0.5, **kwargs):
    outcome = Outcome(status, score=score if status == "completed" else None, best_step=0,
                      metrics={"val_accuracy": score}, error="" if status == "completed" else "boom")
    return trial_claims.finish_trial(trial_pk=trial.pk, outcome=outcome, oracles=ORACLES, **kwargs)


def run_to_the_end(study, scores):
    trial = claim(study).trial
    for i, score in enumerate(scores):
        nxt = Claimant(tuner_id=f"w{i + 2}", worker_host="h") if i + 1 < len(scores) else None
        done = finish(trial, score=score, next_claimant=nxt)
        trial = done.claim.trial if done.claim else None
    return Study.objects.get(pk=study.pk)


def opt_in(user, team, events=ALL, only_mine=False, email=None):
    user.email = email or f"{user.username}@example.com"
    user.save(update_fields=["email"])
    NotificationPreference.objects.create(user=user, team=team, events=list(events), only_mine=only_mine)


def deliveries(kind):
    return list(NotificationDelivery.objects.filter(event__kind=kind).order_by("channel", "target"))


@pytest.fixture
def hook(acme, alice, loopback_receivers):
    webhook, _ = webhook_create(team=acme, user=alice, name="alerts", url="http://127.0.0.1:9/hook",
                                events=[EventKind.STUDY_COMPLETED, EventKind.WORKER_LOST])
    return webhook


def test_a_completed_study_notifies_the_members_who_opted_in_and_the_webhooks_that_want_it(
        make_study, acme, alice, bob, charlie, hook, django_capture_on_commit_callbacks):
    opt_in(alice, acme)
    opt_in(bob, acme, events=[EventKind.STUDY_FAILED])  # a viewer who wants failures only
    opt_in(charlie, charlie.memberships.get().team)  # another team
    study = studies.study_start(study=make_study(max_trials=2, objective_metric="val_accuracy",
                                                    objective_direction="max"))
    with django_capture_on_commit_callbacks() as callbacks:
        study = run_to_the_end(study, [0.25, 0.75])
    assert study.status == Study.Status.COMPLETED
    sent = deliveries(EventKind.STUDY_COMPLETED)
    assert [(d.channel, d.target, d.status, d.attempts) for d in sent] == [
        ("email", "alice@example.com", "pending", 0), ("webhook", "alerts (http://127.0.0.1:9/…)", "pending", 0)]
    event = sent[0].event
    # The best is the second trial: "Trial 2" as the pages number it (KerasTuner's id is "1").
    assert event.team == acme and "finished: 2 trials completed, best val_accuracy 0.75 (Trial 2)" in event.text
    payload = event.payload
    assert payload["event"] == "study.completed" and payload["team"] == {"id": acme.id, "name": "Acme"}
    assert payload["study"]["id"] == study.id and payload["study"]["best_score"] == 0.75
    assert payload["study"]["best_trial"] == 2
    assert payload["url"] == f"http://127.0.0.1:8000/studies/{study.id}/"
    assert payload["text"].startswith("[Acme] Study") and f"<{payload['url']}|Open in Tuneboard>" in payload["text"]
    # The delivery tasks go to the broker once the finish commits.
    assert any(callback.__qualname__.startswith("deliveries_enqueue.") for callback in callbacks)


def test_nobody_listening_writes_nothing(make_study):
    study = run_to_the_end(studies.study_start(study=make_study(max_trials=1)), [0.5])
    assert study.status == Study.Status.COMPLETED
    assert not NotificationEvent.objects.exists()


def test_a_finish_that_rolls_back_sends_nothing(make_study, acme, alice, hook, django_capture_on_commit_callbacks):
    opt_in(alice, acme)
    study = studies.study_start(study=make_study(max_trials=1))
    trial = claim(study).trial
    with django_capture_on_commit_callbacks() as callbacks:
        with pytest.raises(RuntimeError), transaction.atomic():
            finish(trial, score=0.9)
            assert Study.objects.get(pk=study.pk).status == Study.Status.COMPLETED
            assert NotificationDelivery.objects.count() == 2  # written with the change...
            raise RuntimeError("the surrounding work fails")
    assert Study.objects.get(pk=study.pk).status == Study.Status.RUNNING
    assert not NotificationEvent.objects.exists() and not NotificationDelivery.objects.exists()  # ...and gone with it
    assert callbacks == []  # and no task was sent


def test_a_failing_notification_never_undoes_the_study_finishing(make_study, acme, alice, monkeypatch, caplog):
    opt_in(alice, acme)

    def broken(*args, **kwargs):
        raise RuntimeError("notification bug")

    monkeypatch.setattr(notifications, "_record", broken)
    study = run_to_the_end(studies.study_start(study=make_study(max_trials=1)), [0.5])
    assert study.status == Study.Status.COMPLETED
    assert "could not record the study.completed notification" in caplog.text


def test_a_study_failing_after_too_many_failed_trials_sends_study_failed(make_study, acme, alice):
    opt_in(alice, acme, events=[EventKind.STUDY_FAILED])
    study = studies.study_start(study=make_study(parallelism=1, max_consecutive_failed_trials=2))
    trial = claim(study).trial
    trial = finish(trial, status="failed", next_claimant=Claimant(tuner_id="w2", worker_host="h")).claim.trial
    finish(trial, status="failed")
    (delivery,) = deliveries(EventKind.STUDY_FAILED)
    assert "failed: 2 trials failed in a row" in delivery.event.text
    assert delivery.event.payload["study"]["status"] == "failed"
    assert not deliveries(EventKind.STUDY_COMPLETED)


def test_only_mine_keeps_other_peoples_studies_out(make_study, acme, alice, django_user_model):
    dora = django_user_model.objects.create_user(username="dora", password="x" * 12)
    membership_add(team=acme, user=dora, role=Membership.Role.EDITOR)
    opt_in(dora, acme, only_mine=True)
    opt_in(alice, acme, only_mine=True)
    run_to_the_end(studies.study_start(study=make_study(max_trials=1)), [0.5])  # alice's study
    assert [d.target for d in deliveries(EventKind.STUDY_COMPLETED)] == ["alice@example.com"]


def test_members_without_an_address_or_who_left_get_nothing(make_study, acme, alice, bob):
    opt_in(alice, acme)
    alice.email = ""
    alice.save(update_fields=["email"])
    opt_in(bob, acme)
    Membership.objects.filter(user=bob).delete()
    run_to_the_end(studies.study_start(study=make_study(max_trials=1)), [0.5])
    assert not NotificationEvent.objects.exists()


def test_a_trial_lost_with_its_worker_sends_worker_lost(make_study, acme, hook):
    study = studies.study_start(study=make_study(parallelism=1))
    trial = claim(study).trial
    Trial.objects.filter(pk=trial.pk).update(heartbeat=timezone.now() - timedelta(hours=1))
    assert trial_reaper.trials_reap_stale() == 1
    (delivery,) = deliveries(EventKind.WORKER_LOST)
    assert delivery.webhook == hook
    assert f"Worker w1@h stopped heartbeating: trial {trial.trial_id} of study" in delivery.event.text
    assert delivery.event.payload["trial"]["id"] == trial.pk and delivery.event.payload["worker"] == "w1@h"
    assert trial_reaper.trials_reap_stale() == 0
    assert len(deliveries(EventKind.WORKER_LOST)) == 1  # reaped once, told once


@pytest.fixture
def requested_model(make_study, alice):
    study = make_study()
    trial = Trial.objects.create(study=study, trial_id="0", number=1, status=Trial.Status.COMPLETED,
                                 hyperparameters={"units": 8, "learning_rate": 0.01}, score=0.9, best_epoch=2)
    (model,) = trained_models_request(study=study, user=alice, trials=[trial], method="retrain")
    return model


def complete(model, attempt):
    return trained_models.model_complete(model_pk=model.pk, attempt=attempt, best_epoch=2, epochs=2,
                                     val_metrics={"accuracy": 0.9}, test_metrics={"accuracy": 0.875},
                                     signature={}, versions={}, files={}, duration_seconds=1.0)


def test_a_completed_model_sends_model_ready_and_a_lost_one_worker_lost(requested_model, acme, alice):
    opt_in(alice, acme)
    attempt = jobs.job_claim(kind=JOB_KINDS["models"], pk=requested_model.pk, worker_host="gpu-1").attempts
    TrainedModel.objects.filter(pk=requested_model.pk).update(heartbeat=timezone.now() - timedelta(hours=1))
    assert jobs.jobs_reap(kind=JOB_KINDS["models"])["requeued"] == 1
    (lost,) = deliveries(EventKind.WORKER_LOST)
    assert "Worker gpu-1 stopped heartbeating" in lost.event.text and "queued again" in lost.event.text
    attempt = jobs.job_claim(kind=JOB_KINDS["models"], pk=requested_model.pk, worker_host="gpu-2").attempts
    assert not complete(requested_model, attempt - 1)  # a superseded attempt announces nothing
    assert not deliveries(EventKind.MODEL_READY)
    assert complete(requested_model, attempt)
    (ready,) = deliveries(EventKind.MODEL_READY)
    assert ready.event.text == f"Model {requested_model.name} v1 is ready: test accuracy 0.875."
    assert ready.event.payload["model"]["id"] == requested_model.pk
    assert ready.event.payload["url"].endswith(f"/models/{requested_model.pk}/")


def test_a_completed_ensemble_sends_ensemble_ready(requested_model, acme, alice):
    opt_in(alice, acme, events=[EventKind.ENSEMBLE_READY])
    complete(requested_model, jobs.job_claim(kind=JOB_KINDS["models"], pk=requested_model.pk, worker_host="h").attempts)
    ensemble = TrainedModel.objects.create(team=acme, kind=TrainedModel.Kind.ENSEMBLE, dataset=requested_model.dataset,
                                           name="blend", version=1, method=TrainedModel.Method.MEAN, seed=0,
                                           created_by=alice)
    assert complete(ensemble, jobs.job_claim(kind=JOB_KINDS["models"], pk=ensemble.pk, worker_host="h").attempts)
    (ready,) = deliveries(EventKind.ENSEMBLE_READY)
    assert ready.event.text == "Ensemble blend v1 is ready: test accuracy 0.875."
    assert ready.event.payload["model"]["kind"] == "ensemble"
    assert not deliveries(EventKind.MODEL_READY)  # alice asked for ensembles only


def test_the_reaper_resends_deliveries_whose_task_was_lost_with_backoff(acme, alice, hook, settings,
                                                                        django_capture_on_commit_callbacks):
    notifications.notify_webhook_test(webhook=hook, user=alice)
    delivery = NotificationDelivery.objects.get()
    long_ago = timezone.now() - timedelta(seconds=settings.RESEND_AFTER_SECONDS + 1)
    assert deliveries_resend_due() == 0  # just sent: it may still arrive
    NotificationDelivery.objects.filter(pk=delivery.pk).update(next_attempt=long_ago, last_sent=long_ago)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert deliveries_resend_due() == 1
    assert [callback.__qualname__ for callback in callbacks] == ["deliveries_enqueue.<locals>.send"]
    delivery.refresh_from_db()
    assert delivery.resends == 1 and delivery.last_sent > long_ago
    NotificationDelivery.objects.filter(pk=delivery.pk).update(last_sent=long_ago)
    assert deliveries_resend_due() == 0  # the second resend waits twice as long
