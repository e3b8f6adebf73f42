import os
from pathlib import Path

import pytest

# Playwright's sync API runs an event loop in the test thread; the ORM calls the tests make
# between browser steps are still synchronous and safe here.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = "/usr/bin/chromium"
OUTPUT = Path(__file__).resolve().parents[2] / "var" / "test" / "browser"


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


# `make docs-images` sets it: the steps a test names for the docs are also written there, as the
# window shows them (1280×800), under the name the docs embed.
DOCS_IMAGES = os.environ.get("TUNEBOARD_DOCS_IMAGES")


@pytest.fixture
def screenshot(page, request):
    OUTPUT.mkdir(parents=True, exist_ok=True)

    def take(step: str, docs: str | None = None) -> Path:
        path = OUTPUT / f"{request.node.name}-{step}.png"
        page.screenshot(path=str(path), full_page=True)
        if docs is not None and DOCS_IMAGES:
            page.screenshot(path=str(Path(DOCS_IMAGES) / f"{docs}.png"))
        return path

    return take


def log_in(page, live_server, username: str, password: str) -> None:
    page.goto(f"{live_server.url}/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/")
