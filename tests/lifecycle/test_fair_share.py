"""Fair share in the claim path, against PostgreSQL with the real KerasTuner adapter: whichever
study's wake-up a worker took, the slot goes to the team furthest below its share, then the higher
priority, then the older study; quotas hold a team back with the reason on its study."""

import itertools
from datetime import timedelta

import pytest
from django.utils import timezone

from experiments.models import Study, TeamQueuePolicy, TrainedModel, Trial
from experiments.scheduling.fair_share import Waiting
from experiments.services import studies
from experiments.services.datasets import dataset_create_bundled
from experiments.services.trial_oracle import Claimant
from tests.integration.helpers import saved_study
from tests.lifecycle.test_trial_runs import ORACLES, finish, fresh
from tests.lifecycle.test_trial_runs import claim as claim_as

_tuners = itertools.count()


def claim(study):
    """A claim by a tuner of its own (KerasTuner hands one tuner asking again its trial in flight)."""
    return claim_as(study, f"t{next(_tuners)}")

pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings("ignore::DeprecationWarning:keras_tuner")]


@pytest.fixture
def team_study(acme, alice, globex, charlie):
    datasets = {}

    def make(team, **options):
        user = alice if team == acme else charlie
        if team.pk not in datasets:
            datasets[team.pk] = dataset_create_bundled(team=team, user=user, bundled_name="iris")
        study = saved_study(team, user, datasets[team.pk], **{"max_trials": 20, "name": f"s{Study.objects.count()}",
                                                               **options})
        return studies.study_start(study=study)

    return make


def next_claimant():
    return Claimant(tuner_id="next", worker_host="h")


def test_a_wakeup_of_a_team_holding_slots_goes_to_the_other_team_waiting(team_study, acme, globex):
    a = team_study(acme, parallelism=20)
    b = team_study(globex, parallelism=4)
    first = claim(a).trial
    assert first.study_id == a.pk  # both teams hold nothing: the older study first
    second = claim(a).trial  # a wake-up of A's, but B holds no slot and A one
    assert second.study_id == b.pk and second.status == Trial.Status.RUNNING
    a, b = fresh(a), fresh(b)
    assert a.wakeups_pending == 19, "A's wake-up was sent again: it keeps asking for its slots"
    assert b.wakeups_pending == 4, "B's own wake-ups are still in flight"
    assert "further below their share" in a.queue_wait and b.queue_wait == ""
    third = claim(a).trial  # one slot each: B, whose trial has held its slot for less time
    assert third.study_id == b.pk
    fourth = claim(a).trial  # A holds one slot, B two
    assert fourth.study_id == a.pk and fresh(a).queue_wait == ""


def test_a_finished_trial_keeps_its_slot_only_while_its_team_is_first(team_study, acme, globex):
    a = team_study(acme, parallelism=2)
    a1, a2 = claim(a).trial, claim(a).trial
    b = team_study(globex, parallelism=2)
    following = finish(a1, next_claimant=next_claimant()).claim
    assert following is None, "B holds nothing and waits: A's freed slot is handed back"
    assert fresh(a).wakeups_pending == 1  # A asks for its freed slot again, behind B
    b1 = claim(a).trial  # the next wake-up a worker takes, A's, goes to B
    assert b1.study_id == b.pk
    following = finish(a2, next_claimant=next_claimant()).claim  # A holds 0, B 1: A keeps it
    assert following.status == "running" and following.trial.study_id == a.pk


def test_a_team_weighs_as_its_policy_says(team_study, acme, globex):
    TeamQueuePolicy.objects.create(team=globex, queue="cpu", weight=3)
    a = team_study(acme, parallelism=4)
    b = team_study(globex, parallelism=4)
    taken = [claim(a).trial.study_id for _ in range(4)]
    # A first (both at 0), then B up to three slots for A's one.
    assert taken == [a.pk, b.pk, b.pk, b.pk]


def test_a_high_priority_study_of_the_team_goes_before_an_older_one(team_study, acme):
    low = team_study(acme, parallelism=2, priority="low")
    high = team_study(acme, parallelism=2, priority="high")
    assert claim(low).trial.study_id == high.pk
    assert "higher-priority" in fresh(low).queue_wait


def test_a_concurrency_quota_holds_the_team_and_says_why(team_study, acme):
    TeamQueuePolicy.objects.create(team=acme, queue="cpu", max_concurrent=1)
    study = team_study(acme, parallelism=3)
    assert claim(study).status == "running"
    assert claim(study).status == "waiting"
    study = fresh(study)
    assert study.wakeups_pending == 1 and Trial.objects.filter(study=study).count() == 1
    assert study.queue_wait == ("Waiting: the team's quota of 1 concurrent trial or job on the CPU queue is in use; "
                                "it frees when one of them ends.")
    assert claim(study).status == "waiting"
    assert fresh(study).wakeups_pending == 1, "the last wake-up asks again later: one in flight, not one per slot"


def test_a_spent_device_hour_quota_stops_new_claims_until_next_month(team_study, acme, globex):
    TeamQueuePolicy.objects.create(team=acme, queue="cpu", device_hours_per_month=1)
    study = team_study(acme, parallelism=2)
    now = timezone.now()
    Trial.objects.create(study=study, trial_id="old", number=99, status=Trial.Status.COMPLETED,
                         started=now - timedelta(hours=2), finished=now, device_seconds=2 * 3600)
    other = team_study(globex, parallelism=1)
    assert claim(study).trial.study_id == other.pk, "the held team's wake-up serves the other team"
    assert claim(study).status == "waiting"
    wait = fresh(study).queue_wait
    assert f"1 CPU device-hours for {now:%B %Y} are spent (2.00 used)" in wait
    assert "new trials and jobs start on 1 " in wait


def test_without_fair_share_a_wakeup_claims_for_its_own_study(team_study, acme, globex, settings):
    settings.FAIR_SHARE = False
    a = team_study(acme, parallelism=3)
    team_study(globex, parallelism=3)
    assert [claim(a).trial.study_id for _ in range(3)] == [a.pk] * 3


def test_wakeups_a_study_never_counted_die_out_instead_of_multiplying(team_study, acme, globex, monkeypatch):
    """A resend can race a claim, so a wake-up may arrive that its study no longer counts: it is
    neither passed on nor turned into a new poll, so extra messages do not circulate for ever."""
    from experiments.services import fair_share

    sent = []
    monkeypatch.setattr(fair_share, "trial_tasks_enqueue", lambda **kwargs: sent.append(kwargs["study_id"]))
    TeamQueuePolicy.objects.create(team=globex, queue="cpu", weight=3)  # B stays first for three slots
    a = team_study(acme, parallelism=3)
    claim(a)
    team_study(globex, parallelism=3)
    Study.objects.filter(pk=a.pk).update(wakeups_pending=0)
    assert claim(a).trial.study.team_id == globex.pk  # the slot still goes where fair share says
    assert sent == [] and fresh(a).wakeups_pending == 0
    Study.objects.filter(pk=a.pk).update(wakeups_pending=1)
    claim(a)  # a counted one is sent on
    assert sent == [a.pk] and fresh(a).wakeups_pending == 1


def test_a_stray_wakeup_of_a_held_team_starts_no_poll_and_passes_no_quota(team_study, acme):
    TeamQueuePolicy.objects.create(team=acme, queue="cpu", max_concurrent=1)
    study = team_study(acme, parallelism=3)
    assert claim(study).status == "running"
    Study.objects.filter(pk=study.pk).update(wakeups_pending=0)
    assert claim(study).status == "waiting"
    assert fresh(study).wakeups_pending == 0 and Trial.objects.filter(study=study).count() == 1


def test_the_concurrency_quota_is_checked_again_under_a_lock(team_study, acme, monkeypatch):
    """Two workers may both read the standing before either claims: the claim itself checks the
    quota again under a lock on the team's policy row."""
    from experiments.services import trial_claims
    from experiments.services.fair_share import Route

    TeamQueuePolicy.objects.create(team=acme, queue="cpu", max_concurrent=1)
    one, two = team_study(acme, parallelism=1), team_study(acme, parallelism=1)
    assert claim(one).status == "running"
    monkeypatch.setattr(trial_claims, "slot_route", lambda study_id, **_: Route(study_id, study_id))
    assert claim(two).status == "waiting"
    assert not Trial.objects.filter(study=two).exists() and "quota of 1 concurrent" in fresh(two).queue_wait


def test_running_trials_count_towards_the_device_hours(team_study, acme):
    TeamQueuePolicy.objects.create(team=acme, queue="cpu", device_hours_per_month=0.001)  # 3.6 s
    study = team_study(acme, parallelism=2)
    first = claim(study).trial
    Trial.objects.filter(pk=first.pk).update(started=timezone.now() - timedelta(minutes=10))
    assert claim(study).status == "waiting", "a running trial's 10 minutes spend the 3.6 seconds"
    assert "device-hours for" in fresh(study).queue_wait


def test_between_teams_level_now_the_one_that_used_the_queue_least_lately_goes_first(team_study, acme, globex):
    a = team_study(acme, parallelism=3)
    b = team_study(globex, parallelism=3)
    assert claim(a).trial.study_id == a.pk and claim(a).trial.study_id == b.pk  # one slot each now
    now = timezone.now()
    Trial.objects.create(study=a, trial_id="earlier", number=50, status=Trial.Status.COMPLETED,
                         started=now - timedelta(minutes=10), finished=now - timedelta(minutes=1))
    assert claim(a).trial.study_id == b.pk, "A is older, but used the queue for 9 more minutes lately"


def _last_sent(job):
    """When the job's message was last sent (each send moves it on)."""
    job.refresh_from_db()
    return job.last_sent


def _idle(study):
    """A running study that waits for no slot (no wake-up in flight): only jobs wait on the queue."""
    Study.objects.filter(pk=study.pk).update(wakeups_pending=0)
    return fresh(study)


def _retrains(study, user, count: int) -> list:
    """`count` retrains of the study queued, oldest first (one completed trial each)."""
    from experiments.services.trained_models import trained_models_request

    trials = [Trial.objects.create(study=study, trial_id=f"r{n}", number=100 + n, status=Trial.Status.COMPLETED,
                                   hyperparameters={"units": 8}, score=0.9, best_epoch=2) for n in range(count)]
    return [trained_models_request(study=study, user=user, trials=[trial], method="retrain")[0] for trial in trials]


def test_a_job_message_claims_the_job_of_the_team_furthest_below_its_share(team_study, acme, globex, alice,
                                                                           charlie, settings, monkeypatch):
    from experiments.services import jobs
    from experiments.services.job_kinds import JOB_KINDS

    kind = JOB_KINDS["models"]
    first, second, third = _retrains(_idle(team_study(acme)), alice, 3)
    (other,) = _retrains(_idle(team_study(globex)), charlie, 1)  # queued last

    def claims(pk):
        return jobs.job_claim(kind=kind, pk=pk, worker_host="h").pk

    assert claims(first.pk) == first.pk, "both teams hold nothing: the oldest job, its own message"
    sent = _last_sent(second)
    assert claims(second.pk) == other.pk, "acme holds a slot, globex none: globex's job takes acme's message"
    assert _last_sent(second) > sent, "the job the message was sent for gets one of its own"
    assert jobs.job_claim(kind=kind, pk=other.pk, worker_host="h") is None, "globex's own message finds it running"
    assert claims(second.pk) == second.pk, "one slot each: the older job"
    fourth = _retrains(_idle(team_study(acme)), alice, 1)[0]
    in_line = Waiting(other.pk, globex.pk, "normal", other.created, kind="models")
    monkeypatch.setattr(jobs, "job_next_in_line", lambda kind, pk: in_line)  # as read before another worker took it
    assert claims(third.pk) == third.pk, "the race for the job in line lost: the message's own job"
    settings.FAIR_SHARE = False
    monkeypatch.undo()
    assert claims(fourth.pk) == fourth.pk


def test_a_wakeup_gives_its_slot_to_another_teams_job_first_and_keeps_its_place(team_study, acme, globex, alice,
                                                                                 charlie):
    """Trials and jobs wait in one order: acme holds a slot, globex's retrain holds none, so acme's
    next wake-up runs globex's job (claimed for the worker), and acme's study asks again."""
    a = team_study(acme, parallelism=4)
    assert claim(a).trial.study_id == a.pk
    (job,) = _retrains(_idle(team_study(globex)), charlie, 1)
    sent = fresh(a).wakeups_pending
    got = claim(a)
    assert got.status == "job" and (got.job.pk, got.job.job_kind.name) == (job.pk, "models")
    job.refresh_from_db()
    assert job.status == "running" and job.attempts == 1
    a = fresh(a)
    assert a.wakeups_pending == sent, "acme's wake-up was sent again: it keeps asking for its slot"
    assert "further below their share" in a.queue_wait
    assert claim(a).trial.study_id == a.pk, "one slot each, nothing of globex's waits: acme's trial"
    (own,) = _retrains(_idle(team_study(acme)), alice, 1)
    TrainedModel.objects.filter(pk=own.pk).update(created=timezone.now() - timedelta(days=1))  # older than A
    assert claim(a).trial.study_id == a.pk, "a team's own job does not take its study's wake-up (broker order)"
    own.refresh_from_db()
    assert own.status == "queued"


def test_a_job_message_gives_its_slot_to_another_teams_study_first(team_study, acme, globex, alice, charlie):
    """acme holds a slot (a running retrain): the message of its next retrain serves globex's waiting
    study, whose trial is claimed without spending its wake-up; the retrain gets a message of its own.
    When that study has no trial to give, the message's own job is claimed."""
    from experiments.services import jobs
    from experiments.services.job_kinds import JOB_KINDS
    from experiments.services.trial_claims import claim_offered_trial

    kind = JOB_KINDS["models"]
    running, queued = _retrains(_idle(team_study(acme)), alice, 2)
    assert jobs.job_claim(kind=kind, pk=running.pk, worker_host="h").pk == running.pk
    b = team_study(globex, parallelism=2)
    turn = jobs.job_claim(kind=kind, pk=queued.pk, worker_host="h")
    assert turn == jobs.StudyTurn(b.pk)
    sent = _last_sent(queued)
    got = claim_offered_trial(study_id=b.pk, claimant=next_claimant(), oracles=ORACLES, kind=kind, pk=queued.pk)
    assert got.status == "running" and got.trial.study_id == b.pk
    assert fresh(b).wakeups_pending == 2, "the study's own wake-ups are still in flight"
    assert _last_sent(queued) > sent and queued.status == "queued", "the retrain keeps a message of its own"
    Study.objects.filter(pk=b.pk).update(status=Study.Status.CANCELLED)
    sent = _last_sent(queued)
    got = claim_offered_trial(study_id=b.pk, claimant=next_claimant(), oracles=ORACLES, kind=kind, pk=queued.pk)
    assert got.status != "running" and _last_sent(queued) == sent, "no trial: no message sent"
    assert jobs.job_claim_own(kind=kind, pk=queued.pk, worker_host="h").pk == queued.pk


def test_another_teams_job_held_by_a_quota_at_the_claim_sends_no_message_and_the_wakeup_claims(
        team_study, acme, globex, alice, charlie, monkeypatch):
    """The route (read without a lock) put globex's job first, but its quota filled meanwhile: the job
    stays queued saying why, with no poll of its own sent (its own message polls), and acme claims."""
    from experiments.services import jobs

    a = team_study(acme, parallelism=4)
    assert claim(a).trial.study_id == a.pk
    (job,) = _retrains(_idle(team_study(globex)), charlie, 1)
    sent = _last_sent(job)
    monkeypatch.setattr(jobs, "job_quota_locked", lambda team_id, queue: "Waiting: the team's quota")
    got = claim(a)
    assert got.status == "running" and got.trial.study_id == a.pk
    job.refresh_from_db()
    assert (job.status, job.queue_wait, job.last_sent) == ("queued", "Waiting: the team's quota", sent)


def test_queued_ensembles_wait_on_their_members_backend_each_worked_out_once(acme, alice, django_assert_num_queries):
    """An ensemble follows no study: its queue (cpu, or cpu-jax when every member trained on JAX) is read
    from its members, once a process; the claim path then reads all queued jobs in two queries."""
    from experiments.selectors.fair_share import queued_jobs
    from experiments.services.ensembles import ensemble_create
    from experiments.services.job_kinds import JOB_KINDS
    from tests.web.registry_rows import registrable

    iris = dataset_create_bundled(team=acme, user=alice, bundled_name="iris")

    def ensemble(backend):
        study = saved_study(acme, alice, iris, name=f"{backend} {Study.objects.count()}", hypermodel="dense",
                            backend=backend)
        return ensemble_create(team=acme, user=alice, method="nelder_mead",
                               members=[registrable(acme, alice, study, n) for n in (1, 2)]).pk

    on_jax = [ensemble("jax") for _ in range(3)]
    on_tf = ensemble("tensorflow")

    def waiting(backend):
        return [w.study_id for w in queued_jobs(kinds=JOB_KINDS.values(), queue="cpu", backend=backend)]

    assert waiting("jax") == on_jax and waiting("tensorflow") == [on_tf]
    with django_assert_num_queries(2):  # every kind in one UNION, the study-less rows in one more
        assert waiting("jax") == on_jax
