"""`tuneboard models quantize` and `tuneboard models variants`: quantized variants of a model, each measured on
the test split beside the float model before it is offered."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tuneboard_client.cli.common import POLL_SECONDS, Failure, OutputOption, _client, _emit, _errors, _sleep, _table
from tuneboard_client.cli.models import models_app
from tuneboard_client.variants import VARIANT_METHODS


def _beside(figure: dict | None, digits: int = 4) -> str:
    if not figure or figure.get("variant") is None:
        return ""
    return f"{figure['float']:.{digits}g} -> {figure['variant']:.{digits}g}"


VARIANT_COLUMNS = [
    ("ID", lambda v: v.get("id")), ("METHOD", lambda v: v.get("method")), ("STATUS", lambda v: v.get("status")),
    ("ACCURACY", lambda v: _beside(v["summary"]["metrics"].get("accuracy"))),
    ("MAE", lambda v: _beside(v["summary"]["metrics"].get("mae"))),
    ("SIZE", lambda v: _beside(v["summary"]["size_bytes"], 6)),
    ("MS/ROW@1", lambda v: _beside(v["summary"]["latency_ms_batch1"], 3)),
    ("RUNTIME", lambda v: v.get("runtime")),
    ("NOTE", lambda v: v["summary"].get("warning") or v.get("error") or ""),
]


@models_app.command("quantize")
@_errors
def models_quantize(ctx: typer.Context, model_id: int,
                    method: Annotated[str, typer.Option("--method", "-m", help=", ".join(VARIANT_METHODS))
                                      ] = "tflite_int8_full",
                    wait: Annotated[bool, typer.Option(help="Wait until it is made and measured.")] = True,
                    out: Annotated[Path | None, typer.Option("--out", help="Save the variant's file here "
                                                                                 "(a file or folder).")] = None,
                    output: OutputOption = None):
    """Make a quantized variant of a model on the fleet and show its test figures beside the float model's."""
    if method not in VARIANT_METHODS:
        raise Failure(f"Unknown --method {method!r}: use one of {', '.join(VARIANT_METHODS)}.")
    client = _client(ctx)
    variant = client.quantize_model(model_id, method)
    if wait:
        variant = client.wait_variant(model_id, variant["id"], interval=POLL_SECONDS, sleep=_sleep)
    _emit(ctx, output, variant, lambda: _table([variant], VARIANT_COLUMNS))
    if wait and variant.get("status") != "completed":
        raise Failure(f"variant {variant.get('id')} {variant.get('status')}: {variant.get('error') or 'no reason'}")
    if out is not None:
        if not out.suffix and not out.exists():  # a name without a suffix is a folder to put the file in
            out.mkdir(parents=True)
        typer.echo(f"Saved {client.download_variant(model_id, variant['id'], out)} (SHA-256 checked).")


@models_app.command("variants")
@_errors
def models_variants(ctx: typer.Context, model_id: int, output: OutputOption = None):
    """A model's quantized variants with their test figures beside the float model's."""
    rows = _client(ctx).list_variants(model_id)
    _emit(ctx, output, rows, lambda: _table(rows, VARIANT_COLUMNS))
