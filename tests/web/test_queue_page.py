"""The queue page and API: what runs and waits, other teams' studies unnamed, a site admin's
shares and quotas (audited), bad input refused with nothing changed; a study's priority editable."""

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from experiments.models import AuditEvent, Study, TeamQueuePolicy, Trial
from experiments.services.datasets import dataset_create_bundled
from tests.api.conftest import token_client
from tests.integration.helpers import saved_study

pytestmark = pytest.mark.django_db


@pytest.fixture
def busy_queue(acme, alice, globex, charlie):
    """Acme runs a trial on the CPU queue and waits for more; Globex runs one."""
    studies = {}
    for team, user, name in ((acme, alice, "acme-search"), (globex, charlie, "globex-secret-search")):
        dataset = dataset_create_bundled(team=team, user=user, bundled_name="iris")
        study = saved_study(team, user, dataset, name=name, parallelism=3)
        Study.objects.filter(pk=study.pk).update(status=Study.Status.RUNNING, started=timezone.now(),
                                                 wakeups_pending=2)
        Trial.objects.create(study=study, trial_id="0", number=1, status=Trial.Status.RUNNING)
        studies[team.name] = study
    return studies


@pytest.fixture
def site_admin(alice):
    alice.is_staff = True
    alice.save(update_fields=["is_staff"])
    return alice


def test_the_queue_page_shows_running_and_waiting_without_naming_other_teams(alice_client, busy_queue):
    page = alice_client.get("/queues/cpu/").content.decode()
    assert "acme-search" in page and "globex-secret-search" not in page and "Globex" not in page
    assert page.count("another team") >= 2  # its running trial and its waiting study
    assert "Next for a free slot." in page and 'id="queue-policy"' not in page
    assert alice_client.get("/queues/nope/").status_code == 404


def test_the_queue_api_says_the_same_and_a_site_admin_sees_every_name(alice, charlie, busy_queue):
    board = token_client(charlie).get("/api/v1/queues/cpu/").json()
    assert {r["study"] for r in board["running"]} == {"globex-secret-search", None}
    assert [w["position"] for w in board["waiting"]] == [1, 2]
    assert {t["team"] for t in board["teams"]} == {"Globex", None} and all(t["share"] == 0.5 for t in board["teams"])
    alice.is_staff = True
    alice.save(update_fields=["is_staff"])
    board = token_client(alice).get("/api/v1/queues/cpu/").json()
    assert {r["study"] for r in board["running"]} == {"acme-search", "globex-secret-search"}


def test_only_a_site_admin_sets_shares_and_quotas(client, alice, globex, bob, busy_queue):
    client.force_login(bob)
    response = client.post("/queues/cpu/policies/", {"team": globex.pk, "weight": 3})
    assert response.status_code == 403 and not TeamQueuePolicy.objects.exists()
    assert token_client(bob).put("/api/v1/queues/cpu/policies/", {"team": globex.pk, "weight": 3},
                                 format="json").status_code == 403
    assert not TeamQueuePolicy.objects.exists()


def test_a_site_admin_sets_a_share_and_quotas_on_the_page_and_in_the_api(client, site_admin, acme, globex,
                                                                          busy_queue):
    client.force_login(site_admin)
    page = client.post("/queues/cpu/policies/", {"team": globex.pk, "weight": "3", "max_concurrent": "2"},
                       follow=True).content.decode()
    assert "share and quotas on the CPU queue are set" in page
    policy = TeamQueuePolicy.objects.get(team=globex, queue="cpu")
    assert (policy.weight, policy.max_concurrent, policy.device_hours_per_month) == (3.0, 2, None)
    event = AuditEvent.objects.get(verb="queue_policy.set")
    assert event.team_id == globex.pk and event.actor == site_admin and event.changes["weight"] == [1.0, 3.0]
    answer = token_client(site_admin).put("/api/v1/queues/gpu/policies/", {"team": acme.pk,
                                                                           "device_hours_per_month": 200},
                                          format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["device_hours_per_month"] == 200 and answer.json()["weight"] == 1.0
    board = token_client(site_admin).get("/api/v1/queues/cpu/").json()
    assert {t["team"]: t["share"] for t in board["teams"]} == {"Acme": 0.25, "Globex": 0.75}


@pytest.mark.parametrize("bad", [{"weight": "0"}, {"weight": "abc"}, {"max_concurrent": "-1"},
                                 {"device_hours_per_month": "1e99"}, {"team": "999999"}])
def test_bad_shares_and_quotas_are_refused_and_change_nothing(client, site_admin, globex, bad):
    client.force_login(site_admin)
    page = client.post("/queues/cpu/policies/", {"team": globex.pk, "weight": "1", **bad}, follow=True)
    assert "flash-error" in page.content.decode()
    body = {"team": globex.pk, "weight": 1, **{k: v for k, v in bad.items()}}
    answer = token_client(site_admin).put("/api/v1/queues/cpu/policies/", body, format="json")
    assert answer.status_code == 400
    assert not TeamQueuePolicy.objects.exists()


def test_a_studys_priority_changes_while_it_runs_and_a_bad_one_is_refused(alice, busy_queue):
    alice_api = token_client(alice)
    study = busy_queue["Acme"]
    answer = alice_api.patch(f"/api/v1/studies/{study.pk}/budget/", {"priority": "high"}, format="json")
    assert answer.status_code == 200 and answer.json()["priority"] == "high"
    assert answer.json()["max_trials"] == study.max_trials
    answer = alice_api.patch(f"/api/v1/studies/{study.pk}/budget/", {"priority": "urgent"}, format="json")
    assert answer.status_code == 400 and Study.objects.get(pk=study.pk).priority == "high"
    other = busy_queue["Globex"]
    assert alice_api.patch(f"/api/v1/studies/{other.pk}/budget/", {"priority": "low"},
                           format="json").status_code == 404


def test_the_scaling_endpoint_leaves_out_demand_a_quota_holds(client, monkeypatch, acme, globex, busy_queue):
    """Acme and Globex each run 1 trial and want 2 more: with Acme at a quota of 1 concurrent trial
    and Globex at a quota of 2, KEDA is asked for Globex's one more slot only."""
    monkeypatch.setenv("TUNEBOARD_SCALING_TOKEN", "t")
    headers = {"Authorization": "Bearer t"}
    assert client.get("/scaling/cpu/", headers=headers).json()["queued_trials"] == 4
    TeamQueuePolicy.objects.create(team=acme, queue="cpu", max_concurrent=1)
    TeamQueuePolicy.objects.create(team=globex, queue="cpu", max_concurrent=2)
    assert client.get("/scaling/cpu/", headers=headers).json()["queued_trials"] == 1


def test_the_site_admins_table_lists_every_team_prefilled_and_a_resave_keeps_what_was_set(
        client, site_admin, acme, globex):
    """No team uses the queue (idle teams are listed too); Globex's quota set earlier shows in its
    row, and posting the row as shown changes nothing."""
    client.force_login(site_admin)
    client.post("/queues/gpu/policies/", {"team": globex.pk, "weight": "2.5", "max_concurrent": "3",
                                          "device_hours_per_month": "40"})
    page = client.get("/queues/gpu/").content.decode()
    assert 'id="queue-policies"' in page and ">Acme</th>" in page and ">Globex</th>" in page
    row = page[page.index(">Globex</th>"):]
    row = row[:row.index("</tr>")]
    assert 'value="2.5"' in row and 'value="3"' in row and 'value="40.0"' in row
    assert f'form="policy-{globex.pk}"' in row and f'id="policy-{globex.pk}"' in row
    client.post("/queues/gpu/policies/", {"team": globex.pk, "weight": "2.5", "max_concurrent": "3",
                                          "device_hours_per_month": "40.0"})
    policy = TeamQueuePolicy.objects.get(team=globex, queue="gpu")
    assert (policy.weight, policy.max_concurrent, policy.device_hours_per_month) == (2.5, 3, 40.0)
    assert TeamQueuePolicy.objects.count() == 1, "showing a team's defaults saves nothing for it"


def test_jobs_hold_slots_and_a_quota_held_job_says_why_on_the_queue_page_and_its_own(
        client, alice, alice_client, acme, busy_queue):
    """Acme (quota 2) runs a trial and a retrain: its third slot's job, a second retrain, waits."""
    from experiments.services.job_kinds import JOB_KINDS
    from experiments.services.jobs import job_claim_own
    from experiments.services.trained_models import trained_models_request

    study = busy_queue["Acme"]
    done = Trial.objects.create(study=study, trial_id="9", number=9, status=Trial.Status.COMPLETED,
                                hyperparameters={"units": 8}, score=0.9, best_epoch=2)
    first, second = (trained_models_request(study=study, user=alice, trials=[done], method="retrain")[0]
                     for _ in range(2))
    # Named as its team knows it: its number and its name.
    named = {model.pk: f"model {model.pk} ({model.name})" for model in (first, second)}
    waiting = {w["job"]: w for w in token_client(alice).get("/api/v1/queues/cpu/").json()["waiting"]}
    # In the one claim order of trials and jobs, the older retrain first.
    assert 0 < waiting[named[first.pk]]["position"] < waiting[named[second.pk]]["position"]
    assert waiting[named[second.pk]]["reason"].startswith("Waiting")
    TeamQueuePolicy.objects.create(team=acme, queue="cpu", max_concurrent=2)
    models = JOB_KINDS["models"]
    assert job_claim_own(kind=models, pk=first.pk, worker_host="w") is not None
    assert job_claim_own(kind=models, pk=second.pk, worker_host="w") is None
    board = token_client(alice).get("/api/v1/queues/cpu/").json()
    assert {t["team"]: t["held"] for t in board["teams"]}["Acme"] == 2
    (running,) = [r for r in board["running"] if r["job"] == named[first.pk]]
    assert (running["study"], running["study_id"]) == ("acme-search", study.pk), "a retrain's study, to its team"
    (held,) = [w for w in board["waiting"] if w["job"] == named[second.pk]]
    assert held["position"] is None and "quota of 2 concurrent trials or jobs" in held["reason"]
    board_page = alice_client.get("/queues/cpu/").content.decode()
    assert f'<a href="/models/{first.pk}/">M{named[first.pk][1:]}</a>' in board_page, "a running job links to its page"
    assert f'<a href="/models/{second.pk}/">M{named[second.pk][1:]}</a>' in board_page, "so does a waiting one"
    page = alice_client.get(f"/models/{second.pk}/").content.decode()
    assert 'id="queue-wait"' in page and "quota of 2 concurrent trials or jobs on the CPU queue" in page
    assert '<a href="/queues/cpu/" id="queue-place">its place in the CPU queue</a>' in page
    assert 'id="queue-place"' not in alice_client.get(f"/models/{first.pk}/").content.decode(), "running: no place"
    client.force_login(User.objects.get(username="charlie"))
    board = client.get("/queues/cpu/").content.decode()
    assert f"Model {first.pk}" not in board and f"Model {second.pk}" not in board, "another team's jobs unnamed"
    assert "acme-search" not in board and [r["study"] for r in token_client(User.objects.get(username="charlie"))
                                           .get("/api/v1/queues/cpu/").json()["running"] if not r["mine"]] == [None] * 2
    User.objects.filter(username="charlie").update(is_staff=True)
    board = client.get("/queues/cpu/").content.decode()
    assert f"Model {first.pk}" in board and f'href="/models/{first.pk}/"' not in board, \
        "a site admin sees it named, not linked to a page only its team may open"


def test_a_job_claimed_while_the_board_is_read_is_listed_once(alice, acme, busy_queue, monkeypatch):
    """The standing (the waiting) and the running jobs are two reads: a retrain claimed between them
    shows as running only, not also as waiting."""
    from experiments.selectors import queue_board as board_module
    from experiments.services.job_kinds import JOB_KINDS
    from experiments.services.jobs import job_claim_own
    from experiments.services.trained_models import trained_models_request

    study = busy_queue["Acme"]
    done = Trial.objects.create(study=study, trial_id="9", number=9, status=Trial.Status.COMPLETED,
                                hyperparameters={"units": 8}, score=0.9, best_epoch=2)
    (job,) = trained_models_request(study=study, user=alice, trials=[done], method="retrain")
    read = board_module.queue_standing

    def then_claimed(**kwargs):
        standing = read(**kwargs)
        job_claim_own(kind=JOB_KINDS["models"], pk=job.pk, worker_host="w")  # a worker takes it now
        return standing

    monkeypatch.setattr(board_module, "queue_standing", then_claimed)
    board = board_module.queue_board(queue="cpu", team=acme, kinds=JOB_KINDS.values())
    assert f"model {job.pk} ({job.name})" in [r["job"] for r in board["running"]]
    assert not [w for w in board["waiting"] if w["job"] and w["job"].startswith(f"model {job.pk} ")]
    assert [w["position"] for w in board["waiting"] if w["position"] is not None] == list(
        range(1, 1 + sum(w["position"] is not None for w in board["waiting"])))


def test_a_study_with_every_trial_started_does_not_wait_for_a_slot(alice, busy_queue):
    """Wake-ups still on their way do not make a study whose trials have all started (none left to
    retry) wait: it is not listed and draws no slot; a lost trial it will retry keeps it waiting."""
    from experiments.selectors.fair_share import queue_standing
    from experiments.services.trial_oracle import TELL_TUNER

    acme = busy_queue["Acme"]

    def waiting():
        return {w.study_id for w in queue_standing(queue="cpu", backend="tensorflow").waiting}

    assert acme.pk in waiting()
    Study.objects.filter(pk=acme.pk).update(max_trials=2)
    # Preempted (handed back: no retry counted), then lost twice, the tuner told of the first loss only.
    Trial.objects.create(study=acme, trial_id="1", number=2, attempt=1, status=Trial.Status.CANCELLED,
                         kt_state={"status": "RUNNING"}, resume={"epoch": 2})
    assert acme.pk in waiting(), "a handed-back trial runs again"
    Trial.objects.create(study=acme, trial_id="1", number=3, attempt=2, status=Trial.Status.LOST,
                         kt_state={"status": "INVALID"})
    assert acme.pk in waiting(), "its tuner retries the lost trial (max_retries_per_trial 1)"
    last = Trial.objects.create(study=acme, trial_id="1", number=4, attempt=3, status=Trial.Status.LOST,
                                kt_state={"status": "RUNNING", TELL_TUNER: "fail"})
    assert acme.pk in waiting(), "lost, its tuner not told yet: the next claim tells it and may retry it"
    Trial.objects.filter(pk=last.pk).update(kt_state={"status": "FAILED"})
    assert acme.pk not in waiting() and busy_queue["Globex"].pk in waiting(), "its tuner gave it up"
    board = token_client(alice).get("/api/v1/queues/cpu/").json()
    assert [w["position"] for w in board["waiting"]] == [1] and board["waiting"][0]["study"] is None


def test_the_estimated_start_says_now_for_a_free_slot_and_how_long_until_a_slot_frees(alice_client, busy_queue):
    """Two slots held by trials that started 20 s ago, trials taking about 10 minutes: both waiting
    studies start in about 9 minutes; with two more slots, now."""
    from experiments.models import Worker

    Trial.objects.filter(status=Trial.Status.RUNNING).update(started=timezone.now() - timezone.timedelta(seconds=20))
    Trial.objects.create(study=busy_queue["Acme"], trial_id="8", number=8, status=Trial.Status.COMPLETED,
                         duration_seconds=600, finished=timezone.now())
    Worker.objects.create(name="w1", hostname="h", pid=1, queues=["cpu"], concurrency=2)

    def waiting_part():
        return alice_client.get("/queues/cpu/").content.decode().split('id="queue-waiting"')[1]

    part = waiting_part()
    assert part.count("(in 9\xa0minutes)") == 2 and "<td>now</td>" not in part
    Worker.objects.filter(name="w1").update(concurrency=4)
    part = waiting_part()
    assert part.count("<td>now</td>") == 2 and "(in " not in part


def test_an_estimate_counts_only_slots_of_the_studys_backend_and_each_studys_own_trial_length(
        alice_client, busy_queue):
    """Both TensorFlow slots busy and a JAX slot free: the waiting TensorFlow studies do not start
    now. Globex's trials take 50 s, Acme's 10 minutes: the slot Globex's trial holds frees in under
    a minute (one mean for the queue said about 5 minutes for both); the second in line takes that
    slot again after the first's trial (the queue's mean, 325 s), before Acme's frees in 9 minutes."""
    from experiments.models import Worker

    Trial.objects.filter(status=Trial.Status.RUNNING).update(started=timezone.now() - timezone.timedelta(seconds=20))
    for name, seconds in (("Acme", 600), ("Globex", 50)):
        Trial.objects.create(study=busy_queue[name], trial_id="8", number=8, status=Trial.Status.COMPLETED,
                             duration_seconds=seconds, finished=timezone.now())
    Worker.objects.create(name="w1", hostname="h", pid=1, queues=["cpu"], concurrency=2)
    Worker.objects.create(name="w2", hostname="h", pid=2, queues=["cpu-jax"], concurrency=1)
    running, waiting = alice_client.get("/queues/cpu/").content.decode().split('id="queue-waiting"')
    assert "<td>now</td>" not in waiting, "a JAX slot never runs a TensorFlow trial"
    assert waiting.count("(in under a minute)") == 1 and waiting.count("(in 5\xa0minutes)") == 1
    assert running.count("under a minute ago") == 2, "not \"0 minutes ago\""
    Worker.objects.filter(name="w1").delete()  # its trials run on, not reaped yet: no TensorFlow slot is live
    waiting = alice_client.get("/queues/cpu/").content.decode().split('id="queue-waiting"')[1]
    assert "(in " not in waiting and "<td>now</td>" not in waiting, "no live slot of its backend: no estimate"


def test_a_study_at_its_parallelism_says_so_to_its_team_only(alice, alice_client, client, charlie, busy_queue):
    """Acme's study runs 3 trials, its parallelism: it takes no slot and is not listed as waiting; the
    page says why, to Acme; Globex's page does not name it."""
    acme = busy_queue["Acme"]
    Study.objects.filter(pk=acme.pk).update(max_trials=10)
    for number in (2, 3):
        Trial.objects.create(study=acme, trial_id=str(number), number=number, status=Trial.Status.RUNNING)
    page = alice_client.get("/queues/cpu/").content.decode()
    (note,) = [part.split("</p>")[0] for part in page.split('id="queue-at-parallelism"')[1:]]
    assert "acme-search</a> runs 3 trials at once, as many as its parallelism (3) allows" in note
    assert "acme-search" not in page.split('id="queue-waiting"')[1]
    assert token_client(alice).get("/api/v1/queues/cpu/").json()["at_parallelism"] == [
        {"id": acme.pk, "name": "acme-search", "running": 3, "parallelism": 3}]
    client.force_login(charlie)
    assert "acme-search" not in client.get("/queues/cpu/").content.decode()
    Study.objects.filter(pk=acme.pk).update(parallelism=4)
    assert 'id="queue-at-parallelism"' not in alice_client.get("/queues/cpu/").content.decode()
    Study.objects.filter(pk=acme.pk).update(parallelism=3, max_trials=3)
    assert 'id="queue-at-parallelism"' not in alice_client.get("/queues/cpu/").content.decode(), \
        "every trial started: nothing left to wait for"


def test_a_trial_past_its_expected_end_frees_its_slot_soon_not_now_and_each_backend_has_its_own_head(
        alice_client, alice, busy_queue):
    """Both trials run 20 minutes where trials take 10: no slot is free, so no row says "now" (the slot
    frees any moment). With Globex's study on JAX, each backend's first in line is next for its slots
    (not "waiting for the team's older work" behind a study the JAX slot cannot run)."""
    from experiments.models import Worker

    Trial.objects.filter(status=Trial.Status.RUNNING).update(started=timezone.now() - timezone.timedelta(minutes=20))
    Trial.objects.create(study=busy_queue["Acme"], trial_id="8", number=8, status=Trial.Status.COMPLETED,
                         duration_seconds=600, finished=timezone.now())
    Worker.objects.create(name="w1", hostname="h", pid=1, queues=["cpu"], concurrency=2)
    waiting = alice_client.get("/queues/cpu/").content.decode().split('id="queue-waiting"')[1]
    assert "<td>now</td>" not in waiting and waiting.count("(in under a minute)") == 2
    Study.objects.filter(pk=busy_queue["Globex"].pk).update(backend="jax")
    Worker.objects.create(name="w2", hostname="h", pid=2, queues=["cpu-jax"], concurrency=1)
    board = token_client(alice).get("/api/v1/queues/cpu/").json()
    assert [w["reason"] for w in board["waiting"]] == ["Next for a free slot."] * 2
