"""Where the client finds its server and token: TUNEBOARD_URL / TUNEBOARD_TOKEN /
TUNEBOARD_TEAM in the environment, else the file `tuneboard login` writes
(~/.config/tuneboard/config.json, or $XDG_CONFIG_HOME/tuneboard/config.json), readable by
its owner only."""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path


class ConfigError(Exception):
    pass


@dataclass
class Settings:
    url: str = ""
    token: str = ""
    team: str | None = None


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "tuneboard" / "config.json"


def read_file(path: Path | None = None) -> dict:
    path = path or config_path()
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"Cannot read {path}: {exc}. Run `tuneboard login` again.") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path} is not a JSON object. Run `tuneboard login` again.")
    return data


def load(*, url: str | None = None, token: str | None = None, team: str | None = None) -> Settings:
    """Explicit values first, then the environment, then the config file."""
    stored = read_file()
    return Settings(
        url=url or os.environ.get("TUNEBOARD_URL") or stored.get("url") or "",
        token=token or os.environ.get("TUNEBOARD_TOKEN") or stored.get("token") or "",
        team=(team or os.environ.get("TUNEBOARD_TEAM") or
              (str(stored["team"]) if stored.get("team") not in (None, "") else None)),
    )


def save(settings: Settings, path: Path | None = None) -> Path:
    """Write the file with mode 0600 (its folder 0700): it holds a secret."""
    path = path or config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    data = {"url": settings.url, "token": settings.token}
    if settings.team not in (None, ""):
        data["team"] = settings.team
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # also when the file already existed with a wider mode
        with os.fdopen(fd, "w") as out:
            json.dump(data, out, indent=2)
            out.write("\n")
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
    os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    return path
