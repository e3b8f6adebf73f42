"""Objects of alice's team (acme) that the web tests look at."""

import io

import pytest
from django.utils import timezone

from experiments.models import Artifact, ModelFile, Study, TrainedModel, Trial, TrialEpoch
from experiments.services.artifacts import artifact_create
from experiments.services.datasets import dataset_create_bundled
from experiments.services.studies import study_start
from tests.integration.helpers import saved_study


@pytest.fixture
def acme_dataset(acme, alice):
    # iris: the smallest bundled dataset, so each test's setup stays fast.
    return dataset_create_bundled(team=acme, user=alice, bundled_name="iris")


@pytest.fixture
def acme_study(acme, alice, acme_dataset) -> Study:
    """Saved, not started."""
    return saved_study(acme, alice, acme_dataset, name="acme study", hypermodel="dense", batch_size=32, seed=1)


@pytest.fixture
def acme_running_study(acme_study) -> Study:
    # Inside the test's transaction the enqueue-on-commit never fires: no worker is needed.
    return study_start(study=acme_study)


@pytest.fixture
def acme_trial(acme_study) -> Trial:
    trial = Trial.objects.create(
        study=acme_study,
        trial_id="0",
        number=1,
        status=Trial.Status.COMPLETED,
        hyperparameters={"units": 8, "learning_rate": 0.01},
        score=0.9,
        best_epoch=2,
        metrics={"val_accuracy": 0.9, "val_loss": 0.3},
    )
    for epoch in (0, 1):
        TrialEpoch.objects.create(
            trial=trial, epoch=epoch, metrics={"loss": 1.0 - epoch / 2, "val_accuracy": 0.8}
        )
    return trial


@pytest.fixture
def acme_model(acme, alice, acme_study, acme_trial):
    """A completed trained model with one small stored file (no worker needed)."""
    model = TrainedModel.objects.create(
        team=acme, dataset=acme_study.dataset, study=acme_study, trial=acme_trial, name="acme-model", version=1,
        method=TrainedModel.Method.RETRAIN, epoch_source=TrainedModel.EpochSource.DETECT, seed=2,
        hyperparameters=acme_trial.hyperparameters, status=TrainedModel.Status.COMPLETED, best_epoch=2, epochs=2,
        val_metrics={"accuracy": 0.9, "loss": 0.3}, test_metrics={"accuracy": 0.875, "loss": 0.35},
        duration_seconds=1.5, created_by=alice, finished=timezone.now(),
    )
    artifact = artifact_create(team=acme, kind=Artifact.Kind.MODEL, filename="acme-model-v1.keras",
                               fileobj=io.BytesIO(b"PK\x03\x04 pretend keras archive " * 100))
    ModelFile.objects.create(model=model, format=ModelFile.Format.KERAS, artifact=artifact)
    return model
