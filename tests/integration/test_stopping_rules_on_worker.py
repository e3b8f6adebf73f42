"""A stopping rule on a real worker: once a trial reaches the study's target, the study ends
COMPLETED with the reason, well short of its budget, and no trial is claimed after."""

import time

import pytest

from experiments.models import Study, Trial
from experiments.services.datasets import dataset_create_bundled
from tests.conftest import wait_for
from tests.integration.helpers import started_study

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def test_a_target_reached_mid_study_ends_it_completed_with_the_reason(acme, alice, start_worker):
    iris = dataset_create_bundled(team=acme, user=alice, bundled_name="iris")
    start_worker("w1")
    # Any accuracy reaches 0: the first trial to finish meets the target, whatever it learned.
    study = started_study(acme, alice, iris, name="stops at target", max_trials=6, epochs=2, parallelism=1,
                          objective_metric="val_accuracy", objective_direction="max", stop_target=0.0)

    def ended():
        study.refresh_from_db()
        return study.status != Study.Status.RUNNING

    wait_for(ended, timeout=180, what="the study to stop at its target")
    assert study.status == Study.Status.COMPLETED, study.message
    first = Trial.objects.get(study=study, number=1)
    assert first.status == Trial.Status.COMPLETED
    assert study.message == f"Stopped early: val_accuracy reached {first.score:.4g} (target 0) at trial 1."
    time.sleep(2)  # a wake-up still in the broker finds nothing to claim
    assert Trial.objects.filter(study=study).count() == 1 < study.max_trials
