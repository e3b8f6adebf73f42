"""Comparing studies in a real Chromium (rows made through the ORM, no worker): ticking studies
on the studies list opens the comparison, whose Plotly chart draws one best-so-far line per
study (and its trials as dots); ticking one study only says why nothing opened."""

import pytest

from experiments.services.datasets import dataset_create_bundled
from tests.browser.conftest import log_in
from tests.conftest import PASSWORD
from tests.web.comparison_rows import scored_study

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_ticking_studies_on_the_list_opens_their_comparison_with_the_chart_drawn(
        live_server, page, acme, alice, screenshot):
    iris = dataset_create_bundled(team=acme, user=alice, bundled_name="iris")
    names = ["lr sweep", "second sweep", "third sweep"]
    for i, name in enumerate(names):
        scored_study(acme, alice, iris, name, 6 + i)
    log_in(page, live_server, "alice", PASSWORD)

    page.goto(f"{live_server.url}/studies/")
    page.get_by_label("Compare lr sweep").check()
    page.get_by_role("button", name="Compare").click()
    page.wait_for_load_state()
    assert "you picked 1" in page.locator(".flash-error").inner_text()

    for name in names:
        page.get_by_label(f"Compare {name}").check()
    screenshot("list")
    page.get_by_role("button", name="Compare").click()
    page.wait_for_url("**/studies/compare/?studies=*")
    page.wait_for_function("document.getElementById('compare-history').data?.length > 0")

    lines = page.evaluate("document.getElementById('compare-history').data"
                          ".filter((t) => t.mode === 'lines').map((t) => t.name)")
    assert sorted(lines) == sorted(names)  # one best-so-far line per study
    svg = page.locator("#compare-history .main-svg").first
    assert svg.is_visible()
    # Drawn, not just configured: the svg holds a line trace and a dot trace for each study.
    assert page.locator("#compare-history .scatterlayer .trace").count() == 2 * len(names)
    assert page.locator("#compare-history .scatterlayer .trace .js-line").count() == len(names)
    table = page.locator("#best-trials-table")
    assert all(name in table.inner_text() for name in names)
    assert page.locator(".importance").count() == len(names)
    screenshot("comparison")


def test_studies_with_different_objectives_get_an_axis_each_and_a_warning(live_server, page, acme, alice,
                                                                           screenshot):
    iris = dataset_create_bundled(team=acme, user=alice, bundled_name="iris")
    accuracy = scored_study(acme, alice, iris, "by accuracy", 6)
    loss = scored_study(acme, alice, iris, "by loss", 6, objective="val_loss", direction="min",
                        score=lambda number, values: 1.0 / number)
    log_in(page, live_server, "alice", PASSWORD)

    page.goto(f"{live_server.url}/studies/compare/?studies={accuracy.id}&studies={loss.id}")
    page.wait_for_function("document.getElementById('compare-history').data?.length > 0")

    assert "These studies optimise different objectives" in page.locator("#objectives-differ").inner_text()
    axes = page.evaluate("(() => { const c = document.getElementById('compare-history');"
                         " return c.data.filter((t) => t.mode === 'lines').map((t) => [t.name, t.yaxis]); })()")
    assert sorted(axes) == [["by accuracy", "y"], ["by loss", "y2"]]
    titles = page.locator("#compare-history .g-ytitle, #compare-history .g-y2title").all_text_contents()
    assert titles == ["val_accuracy (max)", "val_loss (min)"]
    assert page.locator("#compare-history .scatterlayer .trace .js-line").count() == 2
    screenshot("two-objectives")
