"""Typed readers for settings from the environment, raising ImproperlyConfigured with the variable's name so a
deployment's typo fails at start-up."""

import ipaddress
import math
import os
import re
import secrets
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from django.core.checks.security.base import (
    SECRET_KEY_INSECURE_PREFIX,
    SECRET_KEY_MIN_LENGTH,
    SECRET_KEY_MIN_UNIQUE_CHARACTERS,
    _check_secret_key,
)
from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (true/false, 1/0), got {raw!r}.")


def _env_number(name: str, default, parse, what: str, minimum):
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = parse(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be {what}, got {raw!r}.") from None
    if not math.isfinite(value):
        raise ImproperlyConfigured(f"{name} must be a finite number, got {raw!r}.")
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}.")
    return value


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    return _env_number(name, default, int, "a whole number", minimum)


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    return _env_number(name, default, float, "a number", minimum)


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_group_roles(name: str, roles: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """`group=Team name:role,...` as (group, team, role) triples: who single sign-on makes what where."""
    found = []
    for item in env_list(name, []):
        group, _, target = item.partition("=")
        team, _, role = target.rpartition(":")
        if not group.strip() or not team.strip() or role.strip() not in roles:
            raise ImproperlyConfigured(f"{name}: {item!r} is not group=Team name:role with a role of "
                                       f"{', '.join(roles)}.")
        found.append((group.strip(), team.strip(), role.strip()))
    return found


def env_prices(name: str, kinds: tuple[str, ...]) -> dict[str, float]:
    """{"gpu": 2.5, ...} from "gpu=2.5,tpu=4": a price per device-hour for some of `kinds`."""
    prices = {}
    for item in env_list(name, []):
        kind, _, price = item.partition("=")
        kind = kind.strip().lower()
        try:
            value = float(price)
        except ValueError:
            value = math.nan
        if kind not in kinds or not math.isfinite(value) or value < 0:
            raise ImproperlyConfigured(f"{name} must be kind=price pairs (kinds {', '.join(kinds)}; prices 0 or "
                                       f"more), e.g. gpu=2.5,tpu=4; got {item!r}.")
        prices[kind] = value
    return prices


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(name, default).strip().lower()
    if value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, got {value!r}.")
    return value


def env_networks(name: str) -> list:
    """Comma-separated networks in CIDR notation ("10.20.0.0/16,fd00:1::/64"); empty: none."""
    networks = []
    for value in env_list(name, []):
        try:
            networks.append(ipaddress.ip_network(value, strict=False))
        except ValueError:
            raise ImproperlyConfigured(f"{name}: {value!r} is not a network in CIDR notation, e.g. 10.20.0.0/16 "
                                       "or 192.168.5.7/32 for one address.") from None
    return networks


# Only ever used with DEBUG on; Django's check --deploy recognises the prefix as insecure.
DEBUG_SECRET_KEY = "django-insecure-tuneboard-debug-only-key-never-use-it-with-DEBUG-off"
SECRET_KEY_HELP = (
    "Set it to a long random string, the same for the web, the workers and beat, e.g. "
    "export {name}=\"$(python3 -c 'import secrets; print(secrets.token_urlsafe(50))')\" "
    "(docker compose: a line {name}=... in .env; Kubernetes: the tuneboard-secrets Secret; "
    "`make run` makes one in var/secret_key). Only for development, DEBUG=true runs without one."
)


def env_secret_key(name: str, *, debug: bool, key_file: Path | None = None) -> str:
    """The signing key, required unless debugging, since a default key would be public and forge sessions and
    password-reset links."""
    value = os.environ.get(name, "").strip()
    if not value and not debug and key_file is not None:
        value = embedded_secret_key(key_file)
    help_text = SECRET_KEY_HELP.format(name=name)
    if value.startswith("CHANGE-ME"):
        raise ImproperlyConfigured(f"{name} is still the placeholder of the example. {help_text}")
    if value and not debug and not _check_secret_key(value):
        # The rule of `manage.py check --deploy` (security.W009), applied where it cannot be skipped.
        raise ImproperlyConfigured(
            f"{name} is too weak to sign sessions and password-reset links: it needs at least "
            f"{SECRET_KEY_MIN_LENGTH} characters, {SECRET_KEY_MIN_UNIQUE_CHARACTERS} of them different, and must "
            f"not start with {SECRET_KEY_INSECURE_PREFIX!r}. {help_text}")
    if value:
        return value
    if debug:
        return DEBUG_SECRET_KEY
    raise ImproperlyConfigured(f"{name} is not set and DEBUG is off. {help_text}")


def embedded_secret_key(path: Path) -> str:
    """The key in `path`, made once at random (readable by its owner only) when missing or empty.
    Made beside and linked into place, so two processes starting at once end up with one key."""
    key = _read_key(path)
    if key:
        return key
    private_dir(path.parent, tighten=False)
    made = path.with_name(f"{path.name}.{os.getpid()}.new")
    fd = os.open(made, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_urlsafe(50) + "\n")
    try:
        if path.exists():  # there but empty: nothing to keep
            os.replace(made, path)
        else:
            os.link(made, path)  # never over a key another process has just made
    except FileExistsError:
        pass
    finally:
        made.unlink(missing_ok=True)
    return _read_key(path)


def _read_key(path: Path) -> str:
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return ""


_META_HEADER = re.compile(r"HTTP_[A-Z0-9_]+")


def env_header_value(name: str, default: tuple[str, str] | None) -> tuple[str, str] | None:
    """A request header and the value that marks a request, e.g. "HTTP_X_FORWARDED_PROTO,https"
    (the header as Django names it in request.META). Empty turns it off."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    if not raw.strip():
        return None
    header, _, value = (part.strip() for part in raw.partition(","))
    if not _META_HEADER.fullmatch(header) or not value or "," in value:
        raise ImproperlyConfigured(
            f"{name} must be HEADER,VALUE with the header as Django names it in request.META, "
            f"e.g. HTTP_X_FORWARDED_PROTO,https; got {raw!r}."
        )
    return header, value


def redact_url(url: str) -> str:
    """The URL with its password masked: messages about bad URLs end up in logs."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return "<unparseable URL>"
    if not password:
        return url
    userinfo, _, host = parts.netloc.rpartition("@")
    user = userinfo.split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def private_dir(path: Path, *, tighten: bool = True) -> Path:
    """`path` as a folder only its owner can read: made so if missing; an existing one is
    tightened only when `tighten` (Tuneboard's own subfolders, never a folder a person named)."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    if tighten:
        _tighten(path, 0o700)
    return path


def _tighten(path: Path, mode: int) -> None:
    info = path.stat()
    if info.st_mode & 0o077 and info.st_uid == os.getuid():  # someone else's folder is theirs to set
        path.chmod(mode)


def private_file(path: Path) -> Path:
    """`path` as a file only its owner can read and write (made empty if missing)."""
    private_dir(path.parent, tighten=False)
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    _tighten(path, 0o600)
    return path
