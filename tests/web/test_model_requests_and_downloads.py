"""Model requests from the study and trial pages, and downloads: streamed, permission-checked,
and refused with a message when the stored bytes are corrupted or gone."""

import json

import pytest
from django.urls import reverse

from experiments.models import StoredChunk, TrainedModel, Trial
from experiments.services.trained_models import ModelRequestError, trained_models_request
from tests.web.pages import page_text, shows

pytestmark = pytest.mark.django_db

RETRAIN = {"top_n": 3, "method": "retrain", "epoch_source": "detect", "epoch_cap": 50}


@pytest.fixture
def bob_client(client, bob):
    client.force_login(bob)
    return client


def _download(client, model, fmt="keras"):
    return client.get(reverse("model_download", args=[model.id, fmt]))


def test_a_download_streams_the_stored_bytes_with_their_size_and_hash(alice_client, acme_model):
    response = _download(alice_client, acme_model)
    assert response.status_code == 200 and response.streaming
    body = b"".join(response.streaming_content)
    artifact = acme_model.files.get().artifact
    assert body == b"PK\x03\x04 pretend keras archive " * 100
    assert response["Content-Length"] == str(artifact.size)
    assert response["X-Content-SHA256"] == artifact.sha256
    assert 'filename="acme-model-v1.keras"' in response["Content-Disposition"]


def test_a_viewer_may_download(bob_client, acme_model):
    assert _download(bob_client, acme_model).status_code == 200


def test_a_format_the_model_does_not_have_is_404(alice_client, acme_model):
    assert _download(alice_client, acme_model, "tflite").status_code == 404
    assert _download(alice_client, acme_model, "exe").status_code == 404


def test_a_corrupted_file_is_refused_with_a_message_not_sent_broken(alice_client, acme_model):
    chunk = StoredChunk.objects.filter(blob__name=acme_model.files.get().artifact.storage_name).first()
    chunk.data = bytes(chunk.data)[:-1] + b"!"
    chunk.save()
    response = _download(alice_client, acme_model)
    assert response.status_code == 500 and not response.streaming
    assert "no longer matches its recorded sha256" in page_text(response)


def test_a_missing_file_is_refused_with_a_message(alice_client, acme_model):
    StoredChunk.objects.filter(blob__name=acme_model.files.get().artifact.storage_name).delete()
    from experiments.models import StoredBlob

    StoredBlob.objects.filter(name=acme_model.files.get().artifact.storage_name).delete()
    response = _download(alice_client, acme_model)
    assert response.status_code == 500
    assert "missing from the artifact storage" in page_text(response)


def test_the_model_card_describes_the_model(alice_client, acme_model):
    response = alice_client.get(reverse("model_card", args=[acme_model.id]))
    assert response["Content-Type"] == "application/json"
    card = json.loads(response.content)
    assert (card["name"], card["version"]) == ("acme-model", 1)
    assert card["lineage"]["study"]["name"] == acme_model.study.name
    assert card["metrics"]["test"] == {"accuracy": 0.875, "loss": 0.35}
    assert card["dataset"]["name"] == "iris" and card["dataset"]["split"]["sizes"]
    assert card["files"][0]["sha256"] == acme_model.files.get().artifact.sha256


def test_the_models_page_and_the_model_page_show_metrics_and_downloads(alice_client, acme_model):
    listing = page_text(alice_client.get(reverse("model_list")))
    assert "acme-model v1" in listing and "0.8750" in listing
    page = page_text(alice_client.get(reverse("model_detail", args=[acme_model.id])))
    assert reverse("model_download", args=[acme_model.id, "keras"]) in page
    assert reverse("model_card", args=[acme_model.id]) in page


def test_retraining_the_top_trials_gives_each_model_its_own_name(alice_client, acme_study, acme_trial):
    second = Trial.objects.create(study=acme_study, trial_id="1", number=2, status=Trial.Status.COMPLETED,
                                  hyperparameters={"units": 4}, score=0.95, best_epoch=1, metrics={})
    third = Trial.objects.create(study=acme_study, trial_id="2", number=3, status=Trial.Status.COMPLETED,
                                 hyperparameters={"units": 2}, score=0.5, best_epoch=1, metrics={})
    response = alice_client.post(reverse("study_models_request", args=[acme_study.id]), RETRAIN)
    assert response.status_code == 302
    models = list(TrainedModel.objects.order_by("id"))
    # The better trial (higher val_accuracy) first; three different configurations, three names
    # (TF Serving would otherwise serve the third best as the highest version of one name), each
    # with the trial's number as its pages show it ("Trial 2"), not KerasTuner's 0-based id.
    assert [(m.trial_id, m.name, m.version, m.status) for m in models] == [
        (second.id, "acme-study-trial-2", 1, "queued"), (acme_trial.id, "acme-study-trial-1", 1, "queued"),
        (third.id, "acme-study-trial-3", 1, "queued")]
    assert models[0].seed == acme_study.seed + second.number
    # Retraining the best one again remakes that name: its version counts up.
    alice_client.post(reverse("study_models_request", args=[acme_study.id]), {**RETRAIN, "top_n": 1})
    assert TrainedModel.objects.order_by("-id").values_list("name", "version").first() == ("acme-study-trial-2", 2)


def test_a_name_given_is_kept_for_one_trial_and_suffixed_for_several(alice, acme_study, acme_trial):
    second = Trial.objects.create(study=acme_study, trial_id="1", number=2, status=Trial.Status.COMPLETED,
                                  hyperparameters={"units": 4}, score=0.95, best_epoch=1, metrics={})
    (one,) = trained_models_request(study=acme_study, user=alice, trials=[acme_trial], method="retrain", name="best")
    several = trained_models_request(study=acme_study, user=alice, trials=[second, acme_trial], method="retrain",
                                     name="best")
    assert (one.name, one.version) == ("best", 1)
    assert [(m.name, m.version) for m in several] == [("best-trial-2", 1), ("best-trial-1", 1)]
    with pytest.raises(ModelRequestError, match="too long to name several models"):
        trained_models_request(study=acme_study, user=alice, trials=[second, acme_trial], method="retrain",
                               name="x" * 80)


def test_the_trial_page_proposes_the_trials_own_name(alice_client, acme_study, acme_trial):
    page = page_text(alice_client.get(reverse("trial_detail", args=[acme_study.id, acme_trial.pk])))
    assert 'value="acme-study-trial-1"' in page  # Trial 1's model


def test_a_viewer_cannot_request_models(bob_client, acme_study, acme_trial):
    response = bob_client.post(reverse("study_models_request", args=[acme_study.id]), RETRAIN)
    assert response.status_code == 403
    response = bob_client.post(reverse("trial_models_request", args=[acme_study.id, acme_trial.pk]), RETRAIN)
    assert response.status_code == 403
    assert not TrainedModel.objects.exists()


@pytest.mark.parametrize("data, message", [
    ({**RETRAIN, "method": "promote"}, "has no checkpoint to promote"),
    ({**RETRAIN, "name": "Not A Slug!"}, "Model name"),
    ({**RETRAIN, "epoch_cap": 0}, "Epoch cap"),
    ({**RETRAIN, "top_n": 0}, "How many of the best trials"),
])
def test_bad_model_requests_say_why_and_save_nothing(alice_client, acme_study, acme_trial, data, message):
    response = alice_client.post(reverse("study_models_request", args=[acme_study.id]), data, follow=True)
    assert shows(response, message)
    assert not TrainedModel.objects.exists()


def test_a_study_without_completed_trials_makes_no_models(alice_client, acme_study):
    response = alice_client.post(reverse("study_models_request", args=[acme_study.id]), RETRAIN, follow=True)
    assert shows(response, "The study has no completed trial to train a model from.")
    assert not TrainedModel.objects.exists()


def test_a_running_trial_cannot_make_a_model(alice_client, acme_study, acme_trial):
    Trial.objects.filter(pk=acme_trial.pk).update(status=Trial.Status.RUNNING)
    response = alice_client.post(reverse("trial_models_request", args=[acme_study.id, acme_trial.pk]),
                                 RETRAIN, follow=True)
    assert shows(response, "has not completed")
    assert not TrainedModel.objects.exists()


def test_a_recorded_best_epoch_is_required_to_reuse_it(acme_study, acme_trial, alice):
    Trial.objects.filter(pk=acme_trial.pk).update(best_epoch=None)
    acme_trial.refresh_from_db()
    with pytest.raises(ModelRequestError, match="no recorded best epoch"):
        trained_models_request(study=acme_study, user=alice, trials=[acme_trial], method="retrain",
                               epoch_source="recorded")
    assert not TrainedModel.objects.exists()


