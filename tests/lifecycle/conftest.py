"""The lifecycle services, in this process, against PostgreSQL: each case takes milliseconds
(claims and finishes with the real KerasTuner adapter, no training, no broker: sends are
queued on commit, which a test's transaction never reaches)."""

import pytest

from experiments.models import Study, Trial
from experiments.services.datasets import dataset_create_bundled
from experiments.services.trained_models import trained_models_request
from tests.integration.helpers import saved_study
from tests.lifecycle.recipe_rows import trial


@pytest.fixture
def iris(acme, alice):
    return dataset_create_bundled(team=acme, user=alice, bundled_name="iris")


@pytest.fixture
def make_study(acme, alice, iris):
    def make(**options):
        return saved_study(acme, alice, iris, **{"max_trials": 6, **options})

    return make


@pytest.fixture
def model(make_study, alice):
    """A retrain of a completed trial, queued."""
    study = make_study()
    trial = Trial.objects.create(study=study, trial_id="0", number=1, status=Trial.Status.COMPLETED,
                                 hyperparameters={"units": 8, "learning_rate": 0.01}, score=0.9, best_epoch=2)
    (model,) = trained_models_request(study=study, user=alice, trials=[trial], method="retrain")
    return model


@pytest.fixture
def two_studies(make_study):
    """Two studies of one dataset with different hypermodels, two finished trials each (the
    recipes' candidates)."""
    dense = make_study(name="dense-search")
    other = make_study(name="other-search")
    Study.objects.filter(pk=other.pk).update(hypermodel="other")
    other.refresh_from_db()
    trials = [trial(dense, 1, 0.30), trial(dense, 2, 0.20), trial(other, 1, 0.25), trial(other, 2, 0.40)]
    return dense, other, trials
