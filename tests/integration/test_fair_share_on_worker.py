"""Fair share with a real worker of two slots: a team that started second gets the first slot that
frees, whatever the order of the wake-ups in the broker, and a team's quota of one concurrent
trial holds while the other team runs beside it."""

import pytest

from experiments.models import Study, TeamQueuePolicy, Trial
from tests.conftest import wait_for
from tests.integration.helpers import digits, saved_study, started_study
from tests.integration.test_parallel_search import finished, overlapping

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def test_the_second_team_gets_the_first_free_slot_and_a_quota_of_one_holds(acme, alice, globex, charlie,
                                                                           start_worker):
    TeamQueuePolicy.objects.create(team=globex, queue="cpu", max_concurrent=1)
    first = started_study(acme, alice, digits(acme, alice), hypermodel="slow", max_trials=5, epochs=3,
                          parallelism=2)
    start_worker("w1", concurrency=2)
    wait_for(lambda: Trial.objects.filter(study=first, status="running").count() == 2, timeout=120,
             what="the first team to take both slots")
    second = started_study(globex, charlie, digits(globex, charlie), hypermodel="slow", max_trials=3, epochs=2,
                           parallelism=2)
    wait_for(lambda: finished(first) and finished(second), timeout=300, what="both studies to finish")
    assert first.status == second.status == Study.Status.COMPLETED, (first.message, second.message)
    a = list(Trial.objects.filter(study=first).order_by("started"))
    b = list(Trial.objects.filter(study=second).order_by("started"))
    # Without fair share the first team's finishing trials would claim its next ones themselves
    # and keep both slots for all five trials.
    assert b[0].started < a[2].started, "the second team waited behind the first team's next trial"
    assert not overlapping(b), "the second team's quota of one concurrent trial did not hold"
    second.refresh_from_db()
    assert second.queue_wait == ""


def test_a_preempted_trial_stops_at_an_epoch_end_and_resumes_from_it(acme, alice, globex, charlie, start_worker):
    """One slot, preemption on: team A's low-priority trial runs, team B's study arrives; the
    worker-led reaper asks A's trial to stop at its next epoch end, B's trial runs, then A's goes on
    from the epoch it stopped at and completes with its eight epochs in all, no attempt lost."""
    from workers.jobs.trials import PREEMPTED_REASON

    start_worker("w1", concurrency=1, env={"TUNEBOARD_PREEMPT_QUEUES": "cpu"})
    first = started_study(acme, alice, digits(acme, alice), hypermodel="slow", max_trials=1, epochs=8, patience=8,
                          parallelism=1, priority="low")
    wait_for(lambda: Trial.objects.filter(study=first, epochs__epoch__gte=1).exists(), timeout=120,
             what="team A's trial two epochs in")
    second = started_study(globex, charlie, digits(globex, charlie), hypermodel="slow", max_trials=1, epochs=2,
                           parallelism=1)
    wait_for(lambda: finished(first) and finished(second), timeout=300, what="both studies to finish")
    assert first.status == second.status == Study.Status.COMPLETED, (first.message, second.message)
    stopped, resumed = Trial.objects.filter(study=first).order_by("attempt")
    assert stopped.status == Trial.Status.CANCELLED and stopped.error == PREEMPTED_REASON and stopped.preempted
    assert resumed.status == Trial.Status.COMPLETED and resumed.attempt == 2
    assert resumed.hyperparameters == stopped.hyperparameters
    b = Trial.objects.get(study=second)
    assert stopped.finished <= b.started < resumed.started, "B ran in the slot A's trial gave up"
    went_on_from = resumed.resume["epoch"]
    assert sorted(stopped.epochs.values_list("epoch", flat=True)) == list(range(went_on_from))
    assert sorted(resumed.epochs.values_list("epoch", flat=True)) == list(range(8)), "the earlier epochs carried"
    assert resumed.epochs_trained == 8 and 1 <= resumed.best_epoch <= 8


def _retrain(study, user, trials, **options):
    from experiments.services.trained_models import trained_models_request

    return trained_models_request(study=study, user=user, trials=trials, method="retrain", epoch_source="recorded",
                                  **options)


def test_trials_and_jobs_of_two_teams_wait_in_one_order(acme, alice, globex, charlie, start_worker):
    """One slot. Team A's study has just used it when team B's retrain arrives: A's next wake-up runs
    B's retrain before A's next trial. Then A's retrain holds the slot when B's study arrives: the
    message of A's next retrain, ahead of B's wake-ups in the broker, trains B's trial first."""
    from experiments.models import TrainedModel

    start_worker("w1", concurrency=1)
    a = started_study(acme, alice, digits(acme, alice), hypermodel="slow", max_trials=3, epochs=3, parallelism=2)
    wait_for(lambda: Trial.objects.filter(study=a, status="running").exists(), timeout=120,
             what="team A's first trial")
    b_data = digits(globex, charlie)
    b_done = saved_study(globex, charlie, b_data, name="b-done")
    done = Trial.objects.create(study=b_done, trial_id="b0", number=0, status=Trial.Status.COMPLETED,
                                hyperparameters={"units": 8, "learning_rate": 0.01}, score=0.9, best_epoch=2)
    (b_job,) = _retrain(b_done, charlie, [done])
    wait_for(lambda: finished(a) and TrainedModel.objects.get(pk=b_job.pk).status == "completed", timeout=300,
             what="team A's study and team B's retrain")
    trials = list(Trial.objects.filter(study=a).order_by("started"))
    b_job.refresh_from_db()
    # Without one order, A's finished trial claims its next one itself (or A's wake-up does, being
    # ahead of B's message in the broker).
    assert trials[0].finished <= b_job.started < trials[1].started, "team B's retrain waited behind A's trials"

    first, second = _retrain(a, alice, trials[:2])
    wait_for(lambda: TrainedModel.objects.get(pk=first.pk).status == "running", timeout=120,
             what="team A's first retrain")
    c = started_study(globex, charlie, b_data, hypermodel="slow", max_trials=1, epochs=2, parallelism=1, name="c")
    wait_for(lambda: finished(c) and TrainedModel.objects.get(pk=second.pk).status == "completed", timeout=300,
             what="team B's study and team A's retrains")
    second.refresh_from_db()
    (c_trial,) = Trial.objects.filter(study=c)
    assert c_trial.started < second.started, "team B's study waited behind team A's queued retrain"
    assert second.attempts == 1, "the retrain whose message served B's trial was claimed once, by a message of its own"
