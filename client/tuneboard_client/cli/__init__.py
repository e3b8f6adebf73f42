"""`tuneboard`: Tuneboard on the command line.

Tables by default; `-o json` (before the command, or after most commands) prints the API's
JSON for scripts. A refused call prints the server's message and exits with code 1.

The app, its options and helpers are in `common`; each command module adds its commands to it
when imported here. The import order below is the order `tuneboard --help` lists them in."""

from __future__ import annotations

import sys

import typer

# isort: off
from tuneboard_client.cli import account, datasets, studies, models, workers, registry, predictions  # noqa: F401
from tuneboard_client.cli import recipes, logs, variants  # noqa: F401
# isort: on
from tuneboard_client.cli.common import app

__all__ = ["app", "main"]


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("Interrupted.", err=True)
        sys.exit(130)
