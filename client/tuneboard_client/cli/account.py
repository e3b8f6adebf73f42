"""`tuneboard login`: store the server URL and API token."""

from __future__ import annotations

from typing import Annotated

import typer

from tuneboard_client import config
from tuneboard_client.cli.common import _connect, _errors, _root, app


@app.command()
@_errors
def login(ctx: typer.Context,
          url: Annotated[str | None, typer.Option(help="The server, e.g. https://tuneboard.example.com")] = None,
          token: Annotated[str | None, typer.Option(help="A personal API token (Account → API tokens).",
                                                    show_default=False)] = None,
          team: Annotated[str | None, typer.Option(help="Team id to act for (default: the token's team).")] = None,
          verify: Annotated[bool, typer.Option(help="Check the token against the server first.")] = True):
    """Store the server URL and API token in ~/.config/tuneboard/config.json (mode 600)."""
    opts = _root(ctx)
    url = url or opts.get("url") or typer.prompt("Tuneboard URL")
    token = token or opts.get("token") or typer.prompt("API token", hide_input=True)
    team = team or opts.get("team")
    if verify:
        with _connect(url, token, team) as client:
            client.get("studies/", page_size=1)
    path = config.save(config.Settings(url=url, token=token, team=team))
    typer.echo(f"Logged in to {url}; saved to {path} (readable by you only).")

