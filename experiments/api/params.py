"""Query parameters checked, with a 400 that names the parameter when one is not what it should be."""

from datetime import date

from experiments.api.errors import invalid
from experiments.tuning.bounds import MAX_ID


def int_param(request, name: str, *, minimum: int = 0) -> int | None:
    raw = request.query_params.get(name, "").strip()
    if not raw:
        return None
    if not (raw.isascii() and raw.isdigit()) or int(raw) > MAX_ID or int(raw) < minimum:
        raise invalid(name, f"Must be a whole number from {minimum} to {MAX_ID}, not {raw!r}.")
    return int(raw)


def date_param(request, name: str) -> date | None:
    raw = request.query_params.get(name, "").strip()
    if not raw:
        return None
    try:
        return date.fromisoformat(raw)
    except ValueError:
        raise invalid(name, f"Write the date as YYYY-MM-DD, not {raw!r}.") from None


def choice_param(request, name: str, choices) -> str:
    raw = request.query_params.get(name, "")
    if raw and raw not in choices:
        raise invalid(name, f"Must be one of {', '.join(choices)}.")
    return raw
