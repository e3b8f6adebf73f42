"""The registry in a real Chromium: an editor registers two finished models from their pages
(the second form proposes the first's registered model), points production at version 1, moves
it to version 2, and rolls the move back with one click; the history keeps every move and the
model page and the leaderboard show the alias. No worker is needed."""

import pytest

from experiments.models import AliasMove, ModelAlias
from experiments.services.datasets import dataset_create_bundled
from tests.browser.conftest import log_in
from tests.conftest import PASSWORD
from tests.integration.helpers import saved_study
from tests.web.registry_rows import registrable

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_an_editor_registers_models_and_moves_and_rolls_back_production(live_server, page, acme, alice,
                                                                        screenshot):
    study = saved_study(acme, alice, dataset_create_bundled(team=acme, user=alice, bundled_name="iris"),
                        name="iris study", hypermodel="dense")
    first, second = (registrable(acme, alice, study, n, test_accuracy=acc) for n, acc in ((1, 0.9), (2, 0.95)))
    log_in(page, live_server, "alice", PASSWORD)

    page.goto(f"{live_server.url}/models/{first.id}/")
    assert page.locator("#register-name").input_value() == "iris"
    page.locator("#register-name").fill("iris-rows")
    page.locator("#register-model").click()
    page.wait_for_selector("#versions-table")
    assert "is now version 1 of iris-rows" in page.locator(".flash-success").inner_text()

    page.goto(f"{live_server.url}/models/{second.id}/")
    assert page.locator("#register-name").input_value() == "iris-rows"
    page.locator("#register-model").click()
    page.wait_for_selector('#versions-table tr[data-version="2"]')

    page.locator("#alias-name").fill("production")
    page.locator("#alias-version").select_option("1")
    page.locator("#set-alias").click()
    page.wait_for_selector('#registry-aliases li[data-alias="production"]')
    assert page.locator("#alias-name").input_value() == "staging"  # production is taken: the next one is proposed
    page.locator("#alias-name").fill("production")
    page.locator("#alias-version").select_option("2")
    page.locator("#set-alias").click()
    page.wait_for_selector("text=iris-rows@production is now version 2.")
    assert "version 2" in page.locator('#registry-aliases li[data-alias="production"]').inner_text()

    latest = AliasMove.objects.order_by("-id").first()
    page.locator(f"#rollback-{latest.id}").click()
    page.wait_for_selector("text=Rolled back: iris-rows@production is version 1.")
    assert "version 1" in page.locator('#registry-aliases li[data-alias="production"]').inner_text()
    rows = page.locator("#moves-table tbody tr").all_inner_texts()
    assert len(rows) == 3 and "alice" in rows[0] and "version 2\tversion 1 rollback" in rows[0]
    screenshot("registered-model")
    assert ModelAlias.objects.get().version.trained_model_id == first.id

    page.goto(f"{live_server.url}/models/{first.id}/")
    assert "@production" in page.locator("#registry-versions").inner_text()
    page.goto(f"{live_server.url}/leaderboard/")
    assert "iris-rows v1 @production" in page.locator(f'tr[data-model="{first.name}-v1"]').inner_text()
