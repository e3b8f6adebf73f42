"""The lifecycle services, in this process, against PostgreSQL: each case takes milliseconds
(claims and finishes with the real KerasTuner adapter, no training, no broker: sends are
queued on commit, which a test's transaction never reaches)."""

import pytest

from experiments.services.datasets import dataset_create_bundled
from tests.integration.helpers import saved_study


@pytest.fixture
def iris(acme, alice):
    return dataset_create_bundled(team=acme, user=alice, bundled_name="iris")


@pytest.fixture
def make_study(acme, alice, iris):
    def make(**options):
        return saved_study(acme, alice, iris, **{"max_trials": 6, **options})

    return make
