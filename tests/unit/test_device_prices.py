"""Prices per device-hour: read from TUNEBOARD_DEVICE_HOUR_PRICES (a typo fails at start-up, naming the
variable) and turned into money only for kinds that have a price."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from experiments.presentation.costs import costs_total, device_cost, money
from webapp.env import env_prices

KINDS = ("cpu", "gpu", "tpu")


def test_prices_are_read_per_kind(monkeypatch):
    monkeypatch.setenv("TB_PRICES", " GPU=2.5, tpu=4 ,cpu=0")
    assert env_prices("TB_PRICES", KINDS) == {"gpu": 2.5, "tpu": 4.0, "cpu": 0.0}
    monkeypatch.delenv("TB_PRICES")
    assert env_prices("TB_PRICES", KINDS) == {}


@pytest.mark.parametrize("value", ["gpu", "gpu=", "gpu=cheap", "fpga=2", "gpu=-1", "gpu=nan", "gpu=inf"])
def test_a_bad_price_fails_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv("TB_PRICES", value)
    with pytest.raises(ImproperlyConfigured, match="TB_PRICES must be kind=price pairs"):
        env_prices("TB_PRICES", KINDS)


def test_device_time_becomes_money_only_where_a_price_is_set(settings):
    settings.DEVICE_HOUR_PRICES, settings.PRICE_CURRENCY = {"gpu": 3.0, "cpu": 0.0}, "EUR"
    assert device_cost(5400, "gpu") == 4.5
    assert device_cost(5400, "tpu") is None  # no price: unknown, not free
    assert device_cost(None, "gpu") is None
    assert costs_total({"gpu": 3600, "cpu": 7200, "tpu": 60}) == 3.0
    assert costs_total({"tpu": 60}) is None
    assert money(1234.5) == "1,234.50 EUR" and money(None) == ""
