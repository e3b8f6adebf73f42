"""A trial that prints, warns, logs, prints a 50 MB storm and then fails on a real worker: its page,
the API and the CLI's route show those lines in order, each with its time, the storm cut to the
bounds with the marker, and the traceback beside the reason."""

import re

import pytest
from django.test import Client
from django.urls import reverse

from experiments.models import Study, Trial
from tests.api.conftest import token_client
from tests.conftest import wait_for
from tests.integration.helpers import digits, started_study

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

EXPLODE = [{"name": "explode", "type": "fixed", "value": True, "parent": None, "parent_values": []},
           {"name": "storm_mb", "type": "fixed", "value": 50, "parent": None, "parent_values": []}]
IN_ORDER = ["chatty: building the model", "chatty: a deliberate warning", "chatty: an error logged by team code",
            "chatty: about to fail", "Traceback (most recent call last)",
            "RuntimeError: chatty: deliberately broken after printing"]


def test_a_failing_trials_prints_warnings_and_traceback_reach_its_page_and_the_api(
        acme, alice, alice_client, charlie, start_worker):
    start_worker()
    study = started_study(acme, alice, digits(acme, alice), hypermodel="chatty", search_space=EXPLODE,
                          max_trials=1, max_consecutive_failed_trials=1)
    wait_for(lambda: Study.objects.get(pk=study.pk).status == Study.Status.FAILED, timeout=180,
             what="the study to fail")
    trial = Trial.objects.get(study=study)
    assert trial.status == Trial.Status.FAILED and "deliberately broken after printing" in trial.error

    runs = token_client(alice).get(reverse("api:trial-logs", args=[study.id, trial.pk])).json()
    assert len(runs) == 1 and runs[0]["running"] is False and runs[0]["attempt"] == trial.attempt
    text = runs[0]["text"]
    positions = [text.find(line) for line in IN_ORDER]
    assert -1 not in positions and positions == sorted(positions), text
    assert all(re.match(r"\d\d:\d\d:\d\d ", line) or "cut here" in line for line in text.splitlines()), \
        "every line has its time"
    # The storm: 500,000 lines, of which the first and last few KB are kept, with the marker between.
    assert runs[0]["lines"] > 500_000 and runs[0]["cut_bytes"] > 49 * 2**20
    assert "lines (" in text and "cut here" in text and len(text.encode()) < (64 + 192 + 1) * 1024
    assert "storm line 000000" in text and "storm line 009999" in text

    (metrics,) = token_client(alice).get(reverse("api:trial-system-metrics", args=[study.id, trial.pk])).json()
    assert metrics["samples"] and metrics["samples"][-1]["values"]["rss_bytes"] > 0

    page = alice_client.get(reverse("trial_detail", args=[study.id, trial.pk])).content.decode()
    assert 'id="logs"' in page and "chatty: about to fail" in page and "Traceback" in page
    # Beside the reason: its last lines, the traceback's end, without opening the log.
    tail = page.split('id="trial-error-tail"')[1].split("</details>")[0]
    assert "RuntimeError: chatty: deliberately broken after printing" in tail and tail.count("\n") <= 20
    download = alice_client.get(reverse("trial_logs_download", args=[study.id, trial.pk]))
    assert download["Content-Disposition"].startswith("attachment;")
    assert "chatty: deliberately broken after printing" in download.content.decode()

    # Another team's member finds nothing there, on the pages or the API.
    other = Client()
    other.force_login(charlie)
    for name in ("trial_logs_download", "trial_logs_live"):
        assert other.get(reverse(name, args=[study.id, trial.pk])).status_code == 404
    for name in ("api:trial-logs", "api:trial-system-metrics"):
        assert token_client(charlie).get(reverse(name, args=[study.id, trial.pk])).status_code == 404
