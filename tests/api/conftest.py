"""API clients for the personas: tokens made by the same service as the tokens page."""

import pytest
from rest_framework.test import APIClient

from experiments.services.api_tokens import api_token_create
from tests.web.conftest import (  # noqa: F401  (fixtures)
    acme_dataset,
    acme_model,
    acme_running_study,
    acme_study,
    acme_trial,
    fast_password_hashing,
)


def token_client(user, **headers) -> APIClient:
    _, token = api_token_create(user=user, name="tests")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}", **headers)
    return client


@pytest.fixture
def alice_api(alice):
    return token_client(alice)


@pytest.fixture
def bob_api(bob):
    return token_client(bob)


@pytest.fixture
def charlie_api(charlie):
    return token_client(charlie)
