"""A Keras backend per study, through the page and the API alike: the form offers TensorFlow and
JAX with what each means, a JAX study's jobs wait on <queue>-jax (the study page says when no
JAX worker serves it), a hypermodel that needs TensorFlow is refused on JAX with the reason and
nothing saved, the fleet shows each worker's backend, and the scaling endpoint counts JAX work
on its own queue."""

import json

import pytest
from django.urls import reverse

from experiments.models import Study, Trial
from experiments.services.datasets import dataset_create_bundled
from experiments.services.fleet import worker_register
from tests.api.conftest import token_client
from tests.integration.helpers import TINY_SPACE
from tests.web.pages import page_text, shows
from tests.web.test_study_form import _form, _post

pytestmark = pytest.mark.django_db


def test_the_form_offers_both_backends_and_a_jax_study_waits_on_its_jax_queue(alice_client, acme_dataset):
    page = alice_client.get(reverse("study_new")).content.decode()
    assert 'name="backend"' in page and ">JAX<" in page and "DataParallel" in page
    response = _post(alice_client, _form(acme_dataset, backend="jax", button="start"))
    assert response.status_code == 302
    study = Study.objects.get()
    assert (study.backend, study.task_queue) == ("jax", "cpu-jax")
    text = page_text(alice_client.get(response["Location"]))
    assert '<dd id="study-backend">JAX (Celery queue <code>cpu-jax</code>)</dd>' in text
    assert "No live JAX worker serves the <strong>cpu-jax</strong> queue" in text
    worker_register(name="jax@host", hostname="host", pid=1, queues=["cpu-jax"], devices=["cpu"], concurrency=1,
                    versions={}, backend="jax")
    assert "No live JAX worker" not in page_text(alice_client.get(response["Location"]))


def test_a_study_without_a_backend_trains_with_tensorflow(alice_client, acme_dataset):
    assert _post(alice_client, _form(acme_dataset, button="save")).status_code == 302
    assert Study.objects.get().task_queue == "cpu"


@pytest.fixture
def reviews(acme, alice):
    return dataset_create_bundled(team=acme, user=alice, bundled_name="reviews")


TEXT_REFUSAL = ("The text hypermodel needs TensorFlow: its TextVectorization layer turns raw strings into tokens "
                "with TensorFlow string ops, which JAX has no equivalent of; choose TensorFlow or another hypermodel.")


def test_the_text_hypermodel_on_jax_is_refused_with_the_reason_by_page_and_api(alice_client, alice, reviews):
    space = [{"name": "encoder", "type": "choice", "values": ["conv1d"], "ordered": False, "parent": None,
              "parent_values": []}]
    response = _post(alice_client, _form(reviews, hypermodel="text", space=space, backend="jax"))
    assert response.status_code == 200 and shows(response, TEXT_REFUSAL)
    api = token_client(alice).post(reverse("api:study-list"), {
        **{k: v for k, v in _form(reviews, hypermodel="text", space=space, backend="jax").items()
           if k not in ("start", "search_space")},
        "search_space": space}, format="json")
    assert api.status_code == 400 and TEXT_REFUSAL in json.dumps(api.json())
    assert not Study.objects.exists()


def test_the_api_creates_a_jax_study_and_shows_each_workers_backend(alice, acme_dataset):
    client = token_client(alice)
    body = {k: v for k, v in _form(acme_dataset, backend="jax").items() if k not in ("start", "search_space")}
    created = client.post(reverse("api:study-list"), {**body, "search_space": TINY_SPACE}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["backend"] == "jax"
    worker_register(name="tf@host", hostname="host", pid=2, queues=["cpu"], devices=["cpu"], concurrency=1,
                    versions={}, backend="tensorflow")
    workers = client.get(reverse("api:worker-list")).json()["results"]
    assert [(w["name"], w["backend"]) for w in workers] == [("tf@host", "tensorflow")]


def test_the_fleet_page_shows_each_workers_backend(alice_client):
    for name, backend, queue in (("jax@h", "jax", "gpu-jax"), ("tf@h", "tensorflow", "gpu")):
        worker_register(name=name, hostname="h", pid=1, queues=[queue], devices=["gpu:0"], concurrency=1,
                        versions={}, backend=backend)
    page = alice_client.get(reverse("worker_list")).content.decode()
    assert '<td class="worker-backend">jax</td>' in page and '<td class="worker-backend">tensorflow</td>' in page


def test_the_scaling_endpoint_counts_jax_work_on_the_jax_queue(client, monkeypatch, acme, alice, acme_dataset):
    monkeypatch.setenv("TUNEBOARD_SCALING_TOKEN", "t")
    for name, backend in (("on jax", "jax"), ("on tf", "tensorflow")):
        study = Study.objects.create(team=acme, dataset=acme_dataset, name=name, hypermodel="dense", queue="gpu",
                                     backend=backend, status=Study.Status.RUNNING, parallelism=1, max_trials=3)
        Trial.objects.create(study=study, trial_id="0", number=1, status=Trial.Status.RUNNING, hyperparameters={})
    headers = {"Authorization": "Bearer t"}
    jax = client.get(reverse("scaling", kwargs={"queue": "gpu-jax"}), headers=headers).json()
    tf = client.get(reverse("scaling", kwargs={"queue": "gpu"}), headers=headers).json()
    assert (jax["queue"], jax["running_trials"]) == ("gpu-jax", 1) and tf["running_trials"] == 1
