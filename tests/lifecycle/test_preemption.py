"""Preemption in the reaper's pass and the epoch verdict, against PostgreSQL (no worker): with every
slot busy and another team waiting below its share, one trial of the team over its share is asked to
stop at its next epoch end; its epoch is kept, and its next attempt carries where to go on from."""

import pytest
from django.utils import timezone

from experiments.models import Trial, Worker
from experiments.services.preemption import trials_preempt
from experiments.services.trial_epochs import trial_record_epoch
from experiments.services.trial_oracle import Outcome
from tests.lifecycle.test_fair_share import claim, team_study  # noqa: F401  (team_study: a fixture)
from tests.lifecycle.test_trial_runs import ORACLES, fresh

pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings("ignore::DeprecationWarning:keras_tuner")]


def live_worker(concurrency: int) -> Worker:
    return Worker.objects.create(name="w1@host", hostname="host", pid=1, queues=["cpu"], concurrency=concurrency,
                                 last_heartbeat=timezone.now())


@pytest.fixture
def full_queue(team_study, acme, globex, settings):  # noqa: F811
    """Acme holds both slots of the CPU queue; Globex's study waits."""
    settings.PREEMPT_QUEUES = ["cpu"]
    live_worker(2)
    a = team_study(acme, parallelism=2, priority="low")
    first, second = claim(a).trial, claim(a).trial
    Trial.objects.filter(pk=first.pk).update(started=timezone.now() - timezone.timedelta(minutes=5))
    b = team_study(globex, parallelism=1)
    return a, b, first, second


def test_a_team_over_its_share_gives_its_latest_trial_up_at_the_next_epoch_end(full_queue):
    a, b, first, second = full_queue
    assert trials_preempt() == 1
    assert Trial.objects.get(pk=second.pk).preempted is not None, "the trial started last: the least to redo"
    assert Trial.objects.get(pk=first.pk).preempted is None
    assert trials_preempt() == 0, "one stop asked at a time"
    verdict = trial_record_epoch(trial_pk=second.pk, execution=0, epoch=2, metrics={"val_accuracy": 0.5})
    assert not verdict and verdict.preempted
    assert Trial.objects.get(pk=second.pk).epochs.filter(epoch=2).exists(), "the epoch it stopped at is kept"
    assert trial_record_epoch(trial_pk=first.pk, execution=0, epoch=2, metrics={"val_accuracy": 0.5})


def test_its_next_attempt_goes_on_from_where_it_stopped_with_no_attempt_counted_against_it(full_queue):
    from experiments.services.trial_claims import finish_trial

    a, b, first, second = full_queue
    trials_preempt()
    for epoch in range(3):
        trial_record_epoch(trial_pk=second.pk, execution=0, epoch=epoch, metrics={"val_accuracy": 0.1 * epoch})
    resume = {"epoch": 3, "history": [[0, {}], [1, {}], [2, {}]], "best": 0.5, "wait": 0, "last_weights": 1,
              "best_weights": None}
    finish_trial(trial_pk=second.pk, outcome=Outcome("released", error="Preempted …", resume=resume), oracles=ORACLES)
    second.refresh_from_db()
    assert second.status == Trial.Status.CANCELLED and second.resume == resume
    assert claim(b).trial.study_id == b.pk  # the waiting team takes the freed slot
    retry = claim(a).trial
    assert retry.trial_id == second.trial_id and retry.attempt == 2 and retry.resume == resume
    assert retry.hyperparameters == second.hyperparameters
    assert list(retry.epochs.order_by("epoch").values_list("epoch", "metrics")) == [
        (e, {"val_accuracy": 0.1 * e}) for e in range(3)], "the epochs before it, carried over"
    assert fresh(a).status == "running"


def test_nothing_is_preempted_while_a_slot_is_free_or_where_it_is_off(full_queue, settings):
    Worker.objects.update(concurrency=3)
    assert trials_preempt() == 0
    Worker.objects.update(concurrency=2)
    settings.PREEMPT_QUEUES = []
    assert trials_preempt() == 0
    assert not Trial.objects.filter(preempted__isnull=False).exists()


def test_a_trial_preempted_twice_keeps_only_its_latest_weights(full_queue):
    import io

    from experiments.models import Artifact
    from experiments.services.artifacts import artifact_create
    from experiments.services.trial_claims import finish_trial

    a, b, first, second = full_queue

    def kept(name):
        return artifact_create(team=a.team, kind=Artifact.Kind.CHECKPOINT, filename=name, fileobj=io.BytesIO(b"w")).id

    def preempted_at(trial, epoch, files):
        return Outcome("released", error="Preempted …", resume={
            "epoch": epoch, "history": [[e, {}] for e in range(epoch)], "best": 0.5, "wait": 0,
            "last_weights": files[0], "best_weights": None, "optimizer": files[1]})

    older = [kept("resume-1"), kept("optimizer-1")]
    finish_trial(trial_pk=second.pk, outcome=preempted_at(second, 2, older), oracles=ORACLES)
    assert claim(b).trial.study_id == b.pk
    retry = claim(a).trial
    newer = [kept("resume-2"), kept("optimizer-2")]
    finish_trial(trial_pk=retry.pk, outcome=preempted_at(retry, 4, newer), oracles=ORACLES)
    assert not Artifact.objects.filter(pk__in=older).exists(), "the weights it went on from are superseded"
    assert Artifact.objects.filter(pk__in=newer).count() == 2, "the weights its next attempt goes on from stay"
