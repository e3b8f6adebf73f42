"""API clients for the personas: tokens made by the same service as the tokens page."""

import pytest
from rest_framework.test import APIClient

from experiments.models import Membership
from experiments.services.api_tokens import api_token_create
from tests.web.conftest import (  # noqa: F401  (fixtures)
    acme_dataset,
    acme_model,
    acme_running_study,
    acme_study,
    acme_trial,
)


def make_token(user, name: str = "tests", team=None) -> str:
    """A token for `team` (default: the user's only team) with the user's role there."""
    membership = Membership.objects.get(user=user, **({"team": team} if team is not None else {}))
    _, token = api_token_create(user=user, name=name, team_id=membership.team_id, role=membership.role)
    return token


def token_client(user, team=None, **headers) -> APIClient:
    token = make_token(user, team=team)
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
