"""The registry's pages: register from the model page (the form proposes a fitting name), the
registered model's versions with their metrics, aliases set and moved, history with who/when/
from/to and one-click rollback; badges on the model page and the leaderboard; bad input says why
and changes nothing; viewers see and cannot write; other teams get 404 and nothing changes."""

import pytest
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

from experiments.models import AliasMove, ModelAlias, ModelVersion, RegisteredModel
from experiments.services.registry import registry_alias_set, registry_register
from tests.web.pages import page_text, shows
from tests.web.registry_rows import registrable, signature
from tests.web.test_cross_team_access import ACTIONS

pytestmark = pytest.mark.django_db

REGISTRY_ACTIONS = {name: data for name, (data, _) in ACTIONS.items()
                    if name.startswith("registry_") or name == "model_register"}


@pytest.fixture
def models(acme, alice, acme_study):
    return [registrable(acme, alice, acme_study, n, test_accuracy=acc) for n, acc in ((1, 0.9), (2, 0.95))]


def _state():
    return (list(RegisteredModel.objects.values_list("name", flat=True)), ModelVersion.objects.count(),
            list(ModelAlias.objects.values_list("name", "version_id")), AliasMove.objects.count())


def test_an_editor_registers_from_the_model_page_and_moves_and_rolls_back_an_alias(alice_client, models):
    first, second = models
    page = page_text(alice_client.get(reverse("model_detail", args=[first.id])))
    assert 'id="registry-none"' in page
    assert 'id="register-name" name="name" list="registered-names" value="iris"' in page
    response = alice_client.post(reverse("model_register", args=[first.id]), {"name": "iris"}, follow=True)
    registered = RegisteredModel.objects.get()
    assert response.redirect_chain[-1][0] == reverse("registry_detail", args=[registered.id])
    assert shows(response, f"{first} is now version 1 of iris.")
    # The second model's form proposes the registered model that takes its input.
    page = page_text(alice_client.get(reverse("model_detail", args=[second.id])))
    assert 'value="iris"' in page and '<option value="iris">' in page
    alice_client.post(reverse("model_register", args=[second.id]), {"name": "iris", "description": "wider"})

    detail = reverse("registry_detail", args=[registered.id])
    set_alias = reverse("registry_alias_set", args=[registered.id])
    assert shows(alice_client.post(set_alias, {"alias": "production", "version": 1}, follow=True),
                 "iris@production is now version 1.")
    alice_client.post(set_alias, {"alias": "production", "version": 2})
    page = page_text(alice_client.get(detail))
    versions = page.split('id="versions-table"')[1]
    assert '<tr data-version="2">' in versions and "0.9500" in versions and "wider" in versions
    assert reverse("model_detail", args=[first.id]) in versions
    history = page.split('id="moves-table"')[1]
    latest = AliasMove.objects.order_by("-id").first()
    assert history.count("<tr data-move=") == 2 and f'id="rollback-{latest.id}"' in history
    assert "alice" in history and "version 1" in history and "version 2" in history

    rolled = alice_client.post(reverse("registry_rollback", args=[registered.id]), {"move": latest.id}, follow=True)
    assert shows(rolled, "Rolled back: iris@production is version 1.")
    assert ModelAlias.objects.get().version.version == 1
    assert AliasMove.objects.order_by("-id").first().rollback_of_id == latest.id

    # Badges: the model page and the leaderboard show the version's aliases; the list counts them.
    model_page = page_text(alice_client.get(reverse("model_detail", args=[first.id])))
    assert "iris</a> version 1" in model_page and "@production" in model_page.split('id="registry"')[1]
    board = page_text(alice_client.get(reverse("leaderboard")))
    row = board.split(f'data-model="{first.name}-v1"')[1].split("</tr>")[0]
    assert "iris v1 @production" in row and f'data-register="{first.id}"' in row
    listing = page_text(alice_client.get(reverse("registry_list")))
    assert "@production → v1" in listing and 'data-registered="iris"' in listing
    assert "Registry</a>" in listing  # the nav link


@pytest.mark.parametrize("name, data, message", [
    ("model_register", {"name": "Iris Prod"}, "may hold only lower-case letters"),
    ("model_register", {"name": ""}, "This field is required."),
    ("registry_alias_set", {"alias": "production", "version": "x"}, "Give the version as a whole number"),
    ("registry_alias_set", {"alias": "production", "version": 5}, "iris has no version 5."),
    ("registry_alias_set", {"alias": "Prod!", "version": 1}, "may hold only lower-case letters"),
    ("registry_alias_remove", {"alias": "staging"}, "iris has no alias 'staging'."),
    ("registry_rollback", {"move": 999_999}, "iris has no alias move 999999."),
])
def test_bad_registry_input_says_why_and_changes_nothing(alice_client, acme, alice, models, name, data, message):
    registered = registry_register(team=acme, model=models[0], name="iris", user=alice).registered_model
    registry_alias_set(registered=registered, alias="production", version=1, user=alice)
    before = _state()
    url = reverse(name, args=[models[1].id if name == "model_register" else registered.id])
    response = alice_client.post(url, data, follow=True)
    assert shows(response, message), page_text(response)[-3000:]
    assert _state() == before


def test_a_model_taking_another_input_is_refused_on_the_page(alice_client, acme, alice, acme_study, models):
    registry_register(team=acme, model=models[0], name="iris", user=alice)
    images = registrable(acme, alice, acme_study, 3, signature=signature(shape=(None, 8, 8, 1), dtype="uint8"))
    response = alice_client.post(reverse("model_register", args=[images.id]), {"name": "iris"}, follow=True)
    assert shows(response, "its input is uint8 (None, 8, 8, 1), not float32 (None, 4)")
    assert ModelVersion.objects.count() == 1


def test_the_registered_models_page_shows_its_signature_and_the_rest_body_every_version_takes(
        alice_client, acme, alice, acme_study, models):
    registered = registry_register(team=acme, model=models[0], name="iris", user=alice).registered_model
    registry_register(team=acme, model=models[1], name="iris", user=alice)
    registry_alias_set(registered=registered, alias="production", version=2, user=alice)
    page = page_text(alice_client.get(reverse("registry_detail", args=[registered.id])))
    signature_card = page.split('id="registry-signature"')[1].split("</section>")[0]
    assert ('<tr data-input="input_0"><td><code>input_0</code></td><td><code>float32 (None, 4)</code></td>'
            "<td>a list of 4 float32 values</td></tr>") in signature_card
    assert "Output: <code>output_0</code>" in signature_card
    assert escape('POST /v1/models/iris/labels/production:predict\n{"inputs": {"input_0": [[0.0, 0.0, 0.0, 0.0]]}}'
                  ) in signature_card
    assert "data-contract-differs" not in page

    # A version registered before serving keys were compared (an older export's Keras name) is flagged.
    old = registrable(acme, alice, acme_study, 3, signature=signature(served_as="features"))
    ModelVersion.objects.create(registered_model=registered, version=3, trained_model=old)
    versions = page_text(alice_client.get(reverse("registry_detail", args=[registered.id]))).split(
        'id="versions-table"')[1]
    assert "serves otherwise: its input is served as &#x27;features&#x27;, not &#x27;input_0&#x27;" in versions


def test_viewers_see_the_registry_but_cannot_write(client, bob, acme, alice, models):
    registered = registry_register(team=acme, model=models[0], name="iris", user=alice).registered_model
    move = registry_alias_set(registered=registered, alias="production", version=1, user=alice)
    client.force_login(bob)
    page = page_text(client.get(reverse("registry_detail", args=[registered.id])))
    assert "@production" in page and 'id="alias-form"' not in page and "rollback-" not in page
    assert 'id="register-form"' not in page_text(client.get(reverse("model_detail", args=[models[1].id])))
    before = _state()
    for name, data in REGISTRY_ACTIONS.items():
        data = {"move": move.id} if name == "registry_rollback" else data
        url = reverse(name, args=[models[1].id if name == "model_register" else registered.id])
        assert client.post(url, data).status_code == 403, name
    assert _state() == before


def test_another_team_gets_404_for_registry_actions_and_nothing_changes(charlie, acme, alice, models):
    registered = registry_register(team=acme, model=models[0], name="iris", user=alice).registered_model
    move = registry_alias_set(registered=registered, alias="production", version=1, user=alice)
    client = Client()
    client.force_login(charlie)
    before = _state()
    for name, data in REGISTRY_ACTIONS.items():
        data = {"move": move.id} if name == "registry_rollback" else data
        url = reverse(name, args=[models[1].id if name == "model_register" else registered.id])
        assert client.post(url, data).status_code == 404, name
    assert client.get(reverse("registry_detail", args=[registered.id])).status_code == 404
    assert "iris" not in page_text(client.get(reverse("registry_list")))
    assert _state() == before
