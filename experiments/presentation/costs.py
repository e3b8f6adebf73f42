"""Device time as money: TUNEBOARD_DEVICE_HOUR_PRICES gives a price per device-hour per kind
(cpu, gpu, tpu); a kind without a price has no cost, rather than a cost of nothing."""

from django.conf import settings


def device_cost(seconds: float | None, kind: str) -> float | None:
    price = settings.DEVICE_HOUR_PRICES.get(kind)
    if price is None or seconds is None:
        return None
    return seconds / 3600 * price


def costs_total(seconds_by_kind: dict[str, float]) -> float | None:
    """What device time of several kinds cost together; None when no kind of it has a price."""
    costs = [c for kind, s in seconds_by_kind.items() if (c := device_cost(s, kind)) is not None]
    return sum(costs) if costs else None


def money(amount: float | None) -> str:
    return "" if amount is None else f"{amount:,.2f} {settings.PRICE_CURRENCY}"
