"""The project's import graph, built once for every guard: grimp reads every import statement,
those inside functions included, so nothing hides behind a deferred import."""

import grimp
import pytest

from tests.layout.test_code_layout import PACKAGES


@pytest.fixture(scope="session")
def graph():
    return grimp.build_graph(*PACKAGES, include_external_packages=True, cache_dir=None)
