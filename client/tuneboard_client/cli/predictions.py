"""`tuneboard predict`: batch predictions on the fleet."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tuneboard_client.cli.common import POLL_SECONDS, Failure, _client, _errors, _sleep, app


@app.command()
@_errors
def predict(ctx: typer.Context,
            model_id: Annotated[int | None, typer.Argument(metavar="[MODEL_ID]",
                                                           help="A trained model or ensemble.")] = None,
            ref: Annotated[str | None, typer.Option("--ref", help="Or a registry reference: NAME@ALIAS "
                                                                   "(e.g. digits@production) or NAME/VERSION.")] = None,
            input_path: Annotated[Path | None, typer.Option(
                "--input", "-i", help="Inputs without labels: CSV rows, a zip or NPZ of images, a CSV of texts, "
                                      "an NPZ of sequences (as the model's dataset).")] = None,
            out: Annotated[Path | None, typer.Option("--out", "-o", help="Where to write the predictions (CSV).")
                           ] = None,
            npz: Annotated[Path | None, typer.Option(help="Also write the raw outputs (NPZ) here.")] = None,
            variant: Annotated[int | None, typer.Option(help="Predict with this made quantized variant of the "
                                                             "model (tuneboard models variants ID).")] = None):
    """Predict a file of inputs on the fleet (a job on the model's queue): wait for it, printing the
    rows done, then save the predictions as CSV (and NPZ)."""
    if (model_id is None) == (ref is None):
        raise Failure("Give a model id or --ref NAME@ALIAS (one of them).")
    if input_path is None or out is None:
        raise Failure("Give the inputs with --input FILE and where to write the CSV with -o FILE.")
    client = _client(ctx)
    job = client.create_prediction(input_path, model=model_id, reference=ref, variant=variant)
    via = f" ({ref}, version {job.get('registry_version')})" if ref else ""
    typer.echo(f"Prediction {job['id']}: {job['rows']} rows with model {job['model']}{via}.", err=True)

    def note(current: dict, _seen={"done": None, "status": None}) -> None:  # noqa: B006 - per-job memo
        if (current.get("rows_done"), current.get("status")) != (_seen["done"], _seen["status"]):
            _seen.update(done=current.get("rows_done"), status=current.get("status"))
            typer.echo(f"  {current.get('status')}: {current.get('rows_done')} / {current.get('rows')} rows", err=True)

    job = client.wait_prediction(job, interval=POLL_SECONDS, on_poll=note, sleep=_sleep)
    if job.get("status") != "completed":
        raise Failure(f"prediction {job.get('id')} {job.get('status')}: {job.get('error') or 'no reason given'}")
    typer.echo(f"Saved {client.download_prediction(job['id'], 'csv', out)} (SHA-256 checked).")
    if npz is not None:
        typer.echo(f"Saved {client.download_prediction(job['id'], 'npz', npz)} (SHA-256 checked).")

