"""Pages readable at size, in a real Chromium (rows made through the ORM, no worker): parallel
coordinates of a dozen hyperparameters show the most important ones with rounded ticks and
let the user add others; a "…started." notice leaves the page when the study ends; names,
dates and trial names stay on one line at 1400 and 1280 px, long names cut in the middle; the
navigation is one line at 1280 px; an image dataset shows its example images beside their
captions."""

import math
import re

import pytest
from django.contrib.messages import constants
from django.contrib.messages.storage.base import Message
from django.contrib.messages.storage.cookie import CookieStorage
from django.http import HttpRequest

from experiments.models import Study, Trial
from experiments.presentation import chart_ticks, dataset_examples
from experiments.services.datasets import dataset_create_bundled
from tests.browser.conftest import log_in
from tests.conftest import PASSWORD
from tests.integration.helpers import saved_study
from tests.web.figures_rows import finished_ensemble, finished_model, finished_trial

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

LONG_NAME = "conv2d_num_filters_in_the_first_block"


def _many_hyperparameter_trials(study, count: int = 30) -> None:
    """Twelve hyperparameters; the score follows the learning rate and units only."""
    for n in range(1, count + 1):
        lr = 10 ** (-4 + 2 * ((n * 7) % count) / count)
        units = 32 * (1 + n % 8)
        hp = {"learning_rate": lr, "units": units, LONG_NAME: 16 * (1 + n % 3), "activation": ["relu", "tanh"][n % 2]}
        hp.update({f"extra_{i}": round(((n * (i + 3)) % 11) / 7.3, 6) for i in range(8)})
        Trial.objects.create(study=study, trial_id=f"{n:02d}", number=n, status=Trial.Status.COMPLETED,
                             hyperparameters=hp, score=0.5 + 0.1 * math.log10(lr) / -4 + units / 1000,
                             best_epoch=2, duration_seconds=3.0)


def _texts(page, selector: str) -> list[str]:
    """The text drawn, without an added <title> (the tooltip)."""
    return page.locator(selector).evaluate_all(
        "(all) => all.map((e) => [...e.childNodes].filter((n) => n.nodeName !== 'title').map((n) => n.textContent)"
        ".join(''))")


def _parallel_axes(page) -> list[str]:
    return page.evaluate("document.getElementById('parallel-chart').data[0].dimensions.map((d) => d.label)")


def test_parallel_coordinates_show_the_top_hyperparameters_with_rounded_ticks(live_server, page, acme, alice,
                                                                               screenshot):
    iris = dataset_create_bundled(team=acme, user=alice, bundled_name="iris")
    study = saved_study(acme, alice, iris, name="wide space", hypermodel="dense")
    Study.objects.filter(pk=study.pk).update(status=Study.Status.COMPLETED)
    _many_hyperparameter_trials(study)
    page.set_viewport_size({"width": 1400, "height": 900})
    log_in(page, live_server, "alice", PASSWORD)
    page.goto(f"{live_server.url}/studies/{study.id}/")
    page.wait_for_function("document.getElementById('parallel-chart').data?.[0]?.dimensions.length > 0")

    axes = _parallel_axes(page)
    assert len(axes) == 7 and axes[-1] == "score"  # six hyperparameters and the score, of twelve
    assert set(axes[:2]) == {"learning_rate", "units"}  # the most important first
    picker = page.locator("#parallel-axes")
    assert "6 of 12 hyperparameters" in picker.locator("summary").inner_text()

    ticks = _texts(page, "#parallel-chart .tick text")
    assert ticks and not [t for t in ticks if re.search(r"\.\d{4,}", t)], ticks  # no -3.481198
    assert {"1e-4", "0.001", "0.01"} <= set(ticks)  # the log-sampled learning rate, in its own values
    titles = _texts(page, "#parallel-chart .axis-title")
    assert len(titles) == 7 and all(len(t) <= 14 for t in titles), titles
    screenshot("top-six")

    # The user adds an axis (the one with the long name), then removes another; the chart follows.
    picker.locator("summary").click()
    unticked = [box.get_attribute("value") for box in picker.locator("input[type=checkbox]").all()
                if not box.is_checked()]
    assert len(unticked) == 6 and LONG_NAME in unticked
    picker.locator(f"input[value={LONG_NAME}]").check()
    page.wait_for_function("document.getElementById('parallel-chart').data[0].dimensions.length === 8")
    assert chart_ticks.short(LONG_NAME) == "conv2d…t_block" and "conv2d…t_block" in _parallel_axes(page)
    title = page.locator("#parallel-chart .axis-title", has_text="conv2d…t_block")
    assert title.locator("title").text_content() == LONG_NAME  # the full name on hover
    picker.locator("input[value=units]").uncheck()
    page.wait_for_function("document.getElementById('parallel-chart').data[0].dimensions.length === 7")
    assert "units" not in _parallel_axes(page)
    assert "6 of 12" in picker.locator("summary").inner_text()
    screenshot("axis-added")


def test_the_started_notice_leaves_an_open_page_when_the_study_ends(live_server, page, acme, alice):
    iris = dataset_create_bundled(team=acme, user=alice, bundled_name="iris")
    study = saved_study(acme, alice, iris, name="short run", hypermodel="dense")
    Study.objects.filter(pk=study.pk).update(status=Study.Status.RUNNING)  # no worker: nothing is enqueued
    log_in(page, live_server, "alice", PASSWORD)
    # The message the start button leaves (views/studies.py), as Django's cookie storage holds it.
    started = Message(constants.SUCCESS, "Study started.", extra_tags="while-running")
    page.context.add_cookies([{"name": "messages", "value": CookieStorage(HttpRequest())._encode([started]),
                               "url": live_server.url}])
    page.goto(f"{live_server.url}/studies/{study.id}/")
    assert page.locator(".flash.while-running:not([hidden])").inner_text() == "Study started."

    Study.objects.filter(pk=study.pk).update(status=Study.Status.COMPLETED)
    page.wait_for_function("document.getElementById('study-status').textContent.trim() === 'Completed'",
                           timeout=10_000)
    assert page.locator(".flash.while-running").count() == 0


ONE_LINE = """(selector) => [...document.querySelectorAll(selector)].filter((el) => {
  const range = document.createRange();
  range.selectNodeContents(el);
  const tops = [...range.getClientRects()].filter((r) => r.width > 0).map((r) => r.top);
  return tops.length > 0 && Math.max(...tops) - Math.min(...tops) > 8;  // a second line, not an inline box's offset
}).map((el) => el.textContent.trim())"""


@pytest.mark.parametrize("width", [1400, 1280])
def test_names_dates_and_trials_stay_on_one_line(live_server, page, acme, alice, width):
    iris = dataset_create_bundled(team=acme, user=alice, bundled_name="iris",
                                  name="iris measurements from the botany department archive")
    study = saved_study(acme, alice, iris, name="a rather long study name about tuning dense networks on iris",
                        hypermodel="dense")
    Study.objects.filter(pk=study.pk).update(status=Study.Status.COMPLETED)
    trials = [finished_trial(study, n, score=0.8 + n / 100) for n in range(1, 13)]
    model = finished_model(acme, alice, study, trials[0], name="dense-iris-retrained-with-a-long-name")
    for n in (1, 10):  # names that differ only at their end
        finished_model(acme, alice, study, trials[n - 1], name=f"dense-iris-retrained-with-a-long-name-trial-{n}")
    finished_ensemble(acme, alice, iris, [model, trials[1]], [0.6, 0.4], name="blend-of-the-two-best-iris-models")
    page.set_viewport_size({"width": width, "height": 900})
    log_in(page, live_server, "alice", PASSWORD)
    for path in ("/studies/", f"/studies/{study.id}/", "/models/", "/leaderboard/", "/datasets/"):
        page.goto(f"{live_server.url}{path}")
        wrapped = page.evaluate(ONE_LINE, "td.name, td.nowrap, a.name-link, a.nowrap, time, .badge")
        assert wrapped == [], f"{path} at {width}px wraps {wrapped}"
        assert page.locator("td.name, a.name-link, a.nowrap, time").count() > 0, path
        # Names are cut in the middle by the page, never at their end by the browser.
        clipped = page.locator("td.name, a.name-link").evaluate_all(
            "(all) => all.filter((e) => e.scrollWidth > e.clientWidth + 1).map((e) => e.textContent)")
        assert clipped == [], f"{path} at {width}px clips {clipped}"
        if path in ("/models/", "/leaderboard/"):
            for n in (1, 10):
                shown = page.locator(f"a[title='dense-iris-retrained-with-a-long-name-trial-{n} v1']").first
                text = shown.inner_text()
                assert text.startswith("dense-iris-") and "…" in text and text.endswith(f"-trial-{n} v1"), (path, text)
    long_link = page.locator("a[title='iris measurements from the botany department archive']")
    assert long_link.inner_text() == "iris measurem…rtment archive"


def test_the_navigation_is_one_line_at_1280_px_for_a_member_with_every_section(live_server, page, acme, alice,
                                                                                screenshot):
    acme.name = "Demo team"  # make run's team, its picker reads "Demo team (owner)"
    acme.save()
    alice.is_staff = True  # the Admin link too, as the demo login has it
    alice.save()
    page.set_viewport_size({"width": 1280, "height": 800})
    log_in(page, live_server, "alice", PASSWORD)
    links = page.locator(".topbar nav a")
    assert links.all_inner_texts() == ["Dashboard", "Datasets", "Studies", "Models", "Leaderboard", "Recipes",
                                       "Registry", "Workers", "Team", "Admin"]
    tops = page.locator(".topbar nav a, .topbar .brand, #team-select, .account-menu summary").evaluate_all(
        "(all) => all.map((e) => { const r = e.getBoundingClientRect(); return r.top + r.height / 2; })")
    assert max(tops) - min(tops) < 4, tops  # every item's middle on one line
    line = page.locator(".topbar nav a").first.evaluate("(a) => parseFloat(getComputedStyle(a).lineHeight)")
    bar = page.locator(".topbar").bounding_box()["height"]
    assert bar < 2 * line + 20, f"the bar is {bar}px high, {line}px a line"
    screenshot("one-line")
    # The account's pages are one click away, under the user's name.
    assert not page.locator(".account-menu a[href='/account/tokens/']").is_visible()
    page.locator(".account-menu summary").click()
    for name in ("Change password", "API tokens", "Notifications"):
        assert page.locator(".account-menu").get_by_role("link", name=name).is_visible()
    assert page.locator(".account-menu").get_by_role("button", name="Log out").is_visible()


def test_an_image_dataset_shows_its_example_images(live_server, page, acme, alice, settings, tmp_path, screenshot):
    settings.VAR_DIR = tmp_path
    digits = dataset_create_bundled(team=acme, user=alice, bundled_name="digits_images")
    log_in(page, live_server, "alice", PASSWORD)
    page.goto(f"{live_server.url}/datasets/{digits.id}/")
    images = page.locator("#example-grid img")
    assert images.count() == 10
    page.wait_for_function("[...document.querySelectorAll('#example-grid img')].every((i) => i.complete)")
    widths = images.evaluate_all("(all) => all.map((i) => i.naturalWidth)")
    assert widths == [dataset_examples.strip_width()] * 10
    assert page.locator("#example-grid figcaption").first.inner_text().startswith("0")
    for width in (1400, 1280, 900, 390):
        page.set_viewport_size({"width": width, "height": 900})
        overlaps = page.evaluate("""() => {
          const box = (e) => e.getBoundingClientRect();
          const meet = (a, b) => a.left < b.right - 1 && b.left < a.right - 1
                                 && a.top < b.bottom - 1 && b.top < a.bottom - 1;
          const captions = [...document.querySelectorAll('#example-grid figcaption')].map(box);
          return [...document.querySelectorAll('#example-grid img')].flatMap((img, i) =>
            captions.map((c, j) => meet(box(img), c) ? `strip ${i} over caption ${j}` : null).filter(Boolean));
        }""")
        assert overlaps == [], f"at {width}px: {overlaps}"
        outside = page.locator("#example-grid figure").evaluate_all(
            "(all) => all.filter((f) => f.querySelector('img').getBoundingClientRect().right"
            " > f.getBoundingClientRect().right + 1).length")
        assert outside == 0, f"at {width}px {outside} strips reach past their figure"
        screenshot(f"digits-{width}")
