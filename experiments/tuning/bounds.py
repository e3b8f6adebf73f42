"""The bounds of everything a person types that becomes a number, id, name or JSON, in one place so every form,
query parameter and API field refuses the same things in the same words."""

import json
import math
import re

MAX_ID = 2**63 - 1  # bigint primary keys
MAX_SEED = 2**31 - 1  # NumPy takes seeds below 2**32; a study adds the trial number to its seed
MAX_HP_INT = 10**9  # no layer size, count or length beyond this is trainable here
MAX_HP_MAGNITUDE = 1e12
MAX_GRID_STEPS = 1_000_000  # values one Int/Float with a step can take
MAX_CHOICES = 1_000
MAX_JSON_CHARS = 200_000
MAX_JSON_NUMBER_DIGITS = 100  # longer numbers are refused by the fields, which name themselves
MAX_FILENAME_CHARS = 200
# Bidirectional embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069) count as control
# characters too: invisible, they make a name or reason display in an order other than it reads
# (the "Trojan Source" trick), so a page could show one thing while the row holds another.
_BIDI = "\u202a-\u202e\u2066-\u2069"
_CONTROL = re.compile(rf"[\x00-\x1f\x7f-\x9f{_BIDI}]")
# What no text a person types holds: C0 controls (but tab, line feed and carriage return, which
# multi-line text has), DEL and C1 (U+0080-U+009F, where a terminal's CSI U+009B lives). A NUL is
# more than PostgreSQL's text columns take; an escape byte rewrites the terminal of whoever
# prints a log line or a CSV export holding it.
_CONTROL_IN_TEXT = re.compile(rf"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f{_BIDI}]")
_CONTROL_NAMES = {0x00: "a NUL character", 0x09: "a tab", 0x0A: "a line break", 0x0D: "a carriage return",
                  0x1B: "an escape character", 0x7F: "a delete character",
                  **dict.fromkeys([*range(0x202A, 0x202F), *range(0x2066, 0x206A)], "a text direction control")}


class InputError(ValueError):
    """A value outside its bounds; the text is for the person who typed it."""


def parse_id(raw) -> int | None:
    """A database id from a query or form value, or None: ASCII digits only ('²'.isdigit() is
    True, but int('²') raises), at most MAX_ID."""
    text = str(raw).strip() if raw is not None else ""
    if not text or len(text) > 19 or not (text.isascii() and text.isdigit()):
        return None
    value = int(text)
    return value if 0 < value <= MAX_ID else None


def control_character_problem(value, *, multiline: bool = True, what: str = "This text") -> str | None:
    """What is wrong with text holding a control character (None: nothing), for the field that
    holds it. `value` may be JSON (lists and objects, keys included), whose place is named;
    `multiline` lets tabs and line breaks through (a text area's text, not a one-line field's)."""
    for place, text in _strings(value, ""):
        found = (_CONTROL if not multiline else _CONTROL_IN_TEXT).search(text)
        if found:
            code = ord(found.group())
            name = _CONTROL_NAMES.get(code, "a control character")
            where = f" in {place}" if place else ""
            return (f"{what} holds {name} (U+{code:04X}) at character {found.start() + 1:,}{where}; remove it "
                    "(text here takes no control characters).")
    return None


def _strings(value, place: str):
    if isinstance(value, str):
        yield place, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key, place)
            yield from _strings(item, f"{place}.{key}" if place else str(key))
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from _strings(item, f"{place}[{i}]")


def non_ascii_digit(text: str) -> str | None:
    """The first digit of `text` that is not 0-9 ('٣' or '²', which str.isdigit() and, for the
    first, int() take), or None."""
    return next((c for c in text if c.isdigit() and not c.isascii()), None)


def header_filename(name: str, suffix: str) -> str:
    """A name made safe for Content-Disposition: printable ASCII without quotes or slashes."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "download"
    return f"{safe[:100]}{suffix}"


def _bounded_number(text: str):
    if len(text.lstrip("-").split(".")[0].split("e")[0].split("E")[0]) > MAX_JSON_NUMBER_DIGITS:
        raise InputError(f"A number in it is too large ({len(text)} digits).")
    return text


def _parse_int(text: str) -> int:
    return int(_bounded_number(text))


def _parse_float(text: str) -> float:
    value = float(_bounded_number(text))
    if not math.isfinite(value):
        raise InputError(f"The number {text[:30]} is too large.")
    return value


def _refuse_constant(name: str):
    raise InputError(f"{name} is not a number JSON allows.")


def load_json(text: str, *, what: str):
    """json.loads with bounds: size, nesting (RecursionError), digits (Python refuses ints over
    4,300 digits with a ValueError), and no NaN or Infinity."""
    if len(text) > MAX_JSON_CHARS:
        raise InputError(f"{what} is too long ({len(text):,} characters; at most {MAX_JSON_CHARS:,}).")
    try:
        return json.loads(text, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_refuse_constant)
    except RecursionError:
        raise InputError(f"{what} is nested too deeply.") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{what} is not valid JSON: {exc}.") from None
    except InputError as exc:
        raise InputError(f"{what}: {exc}") from None
    except ValueError as exc:
        raise InputError(f"{what}: a number in it is too large ({exc}).") from None
