"""`tuneboard register`, `registry list/show` and `alias set/remove/rollback` against a live
server (no worker: the models are finished rows with a recorded signature)."""

import json

import pytest

if not __import__("django.conf").conf.settings.configured:  # run with -p no:django: unit tests only
    pytest.skip("needs pytest-django (the live server and the test database)", allow_module_level=True)


from experiments.models import AliasMove, ModelAlias  # noqa: E402
from experiments.services.datasets import dataset_create_bundled  # noqa: E402
from tests.integration.helpers import saved_study  # noqa: E402
from tests.web.registry_rows import registrable, signature  # noqa: E402

pytestmark = pytest.mark.django_db(transaction=True)


def test_register_and_move_aliases_from_the_command_line(acme, alice, live_tuneboard):
    tuneboard = live_tuneboard
    study = saved_study(acme, alice, dataset_create_bundled(team=acme, user=alice, bundled_name="iris"),
                        name="iris study", hypermodel="dense")
    first, second = (registrable(acme, alice, study, n, test_accuracy=acc) for n, acc in ((1, 0.9), (2, 0.95)))
    images = registrable(acme, alice, study, 3, signature=signature(shape=(None, 8, 8, 1), dtype="uint8"))
    assert tuneboard("register", first.id, "--as", "iris").strip() == f"{first} is now version 1 of iris."
    assert json.loads(tuneboard("-o", "json", "register", second.id, "--as", "iris"))["version"] == 2
    refused = tuneboard("register", images.id, "--as", "iris", code=1)
    assert "its input is uint8 (None, 8, 8, 1), not float32 (None, 4)" in refused

    assert "iris@production is now version 1 (was —;" in tuneboard("alias", "set", "iris", "production", 1)
    assert "iris@production is now version 2 (was v1;" in tuneboard("alias", "set", "iris", "production", 2)
    assert "iris has no version 9." in tuneboard("alias", "set", "iris", "production", 9, code=1)
    assert "iris@production is now version 1 (was v2;" in tuneboard("alias", "rollback", "iris", "production")
    assert ModelAlias.objects.get().version.version == 1 and AliasMove.objects.count() == 3

    listing = tuneboard("registry", "list")
    assert "iris" in listing and "production→v1" in listing
    shown = tuneboard("registry", "show", "iris")
    assert "accuracy=0.9500" in shown and "alice" in shown
    detail = json.loads(tuneboard("-o", "json", "registry", "show", "iris"))
    assert [(m["from_version"], m["to_version"]) for m in detail["moves"]] == [(2, 1), (1, 2), (None, 1)]
    assert "removed" in tuneboard("alias", "remove", "iris", "production")
    assert "No registered model named 'nope'" in tuneboard("registry", "show", "nope", code=1)
