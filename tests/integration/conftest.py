"""The integration tests' own Redis server, for the ones that stop or restart it."""

import pytest

from tests.integration.restarts import OwnRedis, use_broker


@pytest.fixture
def own_redis(settings):
    """A Redis of this test's own that this process sends to (and its workers and beat, given
    `own_redis.env`): stopped or restarted beside other tests, which keep the shared one."""
    server = OwnRedis()
    shared = settings.CELERY_BROKER_URL
    settings.CELERY_BROKER_URL = server.url
    use_broker(server.url)
    yield server
    use_broker(shared)
    server.stop()
