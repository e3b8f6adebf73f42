"""`tuneboard models ...` and `tuneboard ensembles ...`: train, wait for, show and download models,
and build ensembles of them."""

from __future__ import annotations

import tempfile
import zipfile
from pathlib import Path
from typing import Annotated

import typer

from tuneboard_client.api import (
    ENSEMBLE_METHODS,
    JOB_ACTIVE,
    MODEL_FORMATS,
    Client,
    TuneboardAPIError,
    normalise_method,
)
from tuneboard_client.cli.common import (
    POLL_SECONDS,
    Failure,
    OutputOption,
    _client,
    _details,
    _emit,
    _errors,
    _metrics,
    _output,
    _sleep,
    _table,
    app,
)

models_app = typer.Typer(help="Trained models: retrain or promote trials, list, download.", no_args_is_help=True)
ensembles_app = typer.Typer(help="Ensembles of models and trial checkpoints.", no_args_is_help=True)
app.add_typer(models_app, name="models")
app.add_typer(ensembles_app, name="ensembles")


MODEL_COLUMNS = [
    ("ID", lambda m: m.get("id")), ("NAME", lambda m: f"{m.get('name')} v{m.get('version')}"
                                     if m.get("version") is not None else m.get("name")),
    ("KIND", lambda m: m.get("kind")), ("METHOD", lambda m: m.get("method")), ("STATUS", lambda m: m.get("status")),
    ("STUDY", lambda m: m.get("study")), ("TEST", lambda m: _metrics(m.get("test_metrics"), ("accuracy", "loss"))),
]


def _wait_all(ctx: typer.Context, client: Client, models: list[dict], as_json: bool) -> list[dict]:
    finished = []
    for model in models:
        def note(m: dict, _seen={"status": None}) -> None:  # noqa: B006 - per-model memo
            if not as_json and m.get("status") != _seen["status"]:
                _seen["status"] = m.get("status")
                typer.echo(f"Model {m.get('id')} {m.get('name', '')}: {m.get('status')}", err=True)

        finished.append(client.wait_model(model, interval=POLL_SECONDS, on_poll=note, sleep=_sleep))
    return finished


def _report_models(ctx: typer.Context, output: str | None, models: list[dict], waited: bool) -> None:
    _emit(ctx, output, models, lambda: _table(models, MODEL_COLUMNS))
    failed = [m for m in models if waited and m.get("status") not in ("completed", *JOB_ACTIVE)]
    for model in failed:
        typer.echo(f"Error: model {model.get('id')} {model.get('status')}: {model.get('error') or 'no reason given'}",
                   err=True)
    if failed:
        raise typer.Exit(1)


@models_app.command("retrain")
@_errors
def models_retrain(ctx: typer.Context, study_id: Annotated[int, typer.Argument(metavar="STUDY")],
                   top: Annotated[int | None, typer.Option("--top", help="The study's best N trials.")] = None,
                   trial: Annotated[int | None, typer.Option(help="One trial (its id) instead of --top.")] = None,
                   method: Annotated[str, typer.Option(help="retrain (on train+validation) or promote "
                                                            "(the trial's checkpoint as is).")] = "retrain",
                   epoch_source: Annotated[str | None, typer.Option(help="detect or recorded.")] = None,
                   epoch_cap: int | None = None,
                   name: Annotated[str | None, typer.Option(help="The models' name (versions count up).")] = None,
                   wait: Annotated[bool, typer.Option(help="Wait until they are trained.")] = False,
                   output: OutputOption = None):
    """Retrain (or promote) a study's best trials as models."""
    if top is None and trial is None:
        top = 1
    if top is not None and trial is not None:
        raise Failure("Give --top or --trial, not both.")
    client = _client(ctx)
    models = client.request_models(study_id, top_n=top, trial=trial, method=method, epoch_source=epoch_source,
                                   epoch_cap=epoch_cap, name=name)
    if wait:
        models = _wait_all(ctx, client, models, _output(ctx, output) == "json")
    _report_models(ctx, output, models, wait)


@models_app.command("list")
@_errors
def models_list(ctx: typer.Context, dataset: str | None = None, study: int | None = None,
                status: str | None = None, kind: str | None = None,
                limit: Annotated[int | None, typer.Option(help="At most this many.")] = None,
                output: OutputOption = None):
    """The team's models and ensembles."""
    client = _client(ctx)
    dataset_id = client.resolve_dataset(dataset) if dataset else None
    rows = client.list_models(dataset=dataset_id, study=study, status=status, kind=kind, limit=limit)
    _emit(ctx, output, rows, lambda: _table(rows, MODEL_COLUMNS))


@models_app.command("show")
@_errors
def models_show(ctx: typer.Context, model_id: int, output: OutputOption = None):
    """One model."""
    model = _client(ctx).get_model(model_id)
    _emit(ctx, output, model, lambda: _details(model))


@models_app.command("wait")
@_errors
def models_wait(ctx: typer.Context, model_ids: list[int], output: OutputOption = None):
    """Wait for models (or ensembles) to finish; exit 1 if one failed."""
    client = _client(ctx)
    models = _wait_all(ctx, client, list(model_ids), _output(ctx, output) == "json")
    _report_models(ctx, output, models, True)


@models_app.command("download")
@_errors
def models_download(ctx: typer.Context, model_id: int,
                    fmt: Annotated[str, typer.Option("--format", "-f", help=", ".join(MODEL_FORMATS))] = "keras",
                    out: Annotated[Path, typer.Option("--out", "-o", help="A file or folder; for savedmodel, the "
                                                                           "folder the zip is extracted into.")
                                   ] = Path("."),
                    keep_zip: Annotated[bool, typer.Option(help="savedmodel: keep the zip, do not extract.")] = False):
    """Download one export, checked against the server's SHA-256; a SavedModel zip is
    extracted into the folder given with -o."""
    client = _client(ctx)
    if fmt != "savedmodel" or keep_zip:
        if fmt == "savedmodel" or str(out).endswith(("/", "\\")):
            out.mkdir(parents=True, exist_ok=True)
        path = client.download_model(model_id, fmt, out)
        typer.echo(f"Saved {path} (SHA-256 checked).")
        return
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out, prefix=".download-") as tmp:
        archive = client.download_model(model_id, fmt, Path(tmp))
        try:
            with zipfile.ZipFile(archive) as zf:
                target = out.resolve()
                for member in zf.namelist():
                    if not (target / member).resolve().is_relative_to(target):
                        raise Failure(f"The archive holds a path outside the folder: {member!r}; not extracted.")
                zf.extractall(out)
                names = zf.namelist()
        except zipfile.BadZipFile as exc:
            raise Failure(f"The SavedModel download is not a zip file: {exc}") from exc
    roots = sorted({str(Path(n).parent) for n in names if n.endswith("saved_model.pb")})
    where = ", ".join(str(out / r) for r in roots) or str(out)
    typer.echo(f"SavedModel extracted to {where} (SHA-256 checked).")

# --- ensembles ------------------------------------------------------------------------------


@ensembles_app.command("create", context_settings={"allow_interspersed_args": True})
@_errors
def ensembles_create(ctx: typer.Context,
                     more: Annotated[list[str] | None, typer.Argument(help="More members (after --members).",
                                                                      show_default=False)] = None,
                     members: Annotated[list[str] | None, typer.Option(
                         "--members", "-m", help="model:ID or trial:ID; repeat, separate with commas, or list them "
                                                 "after --members.")] = None,
                     method: Annotated[str, typer.Option(help="mean, nelder-mead, greedy or stacking.")] = "mean",
                     name: Annotated[str | None, typer.Option(help="The ensemble's name.")] = None,
                     greedy_rounds: Annotated[int | None, typer.Option(help="greedy: rounds (server default 50).")
                                              ] = None,
                     seed: Annotated[int | None, typer.Option(help="Seed (server default 0).")] = None,
                     wait: Annotated[bool, typer.Option(help="Wait until it is built.")] = False,
                     output: OutputOption = None):
    """Build an ensemble of models and trial checkpoints, e.g.
    `--members model:1 model:2 trial:7 --method nelder-mead --name trio`."""
    refs = [ref.strip() for item in [*(members or []), *(more or [])] for ref in item.split(",") if ref.strip()]
    bad = [ref for ref in refs if not _member_ok(ref)]
    if bad:
        raise Failure(f"Members are model:ID or trial:ID, not {', '.join(map(repr, bad))}.")
    if len(refs) < 2:
        raise Failure("An ensemble needs at least two members (--members model:1 model:2).")
    method = normalise_method(method)
    if method not in ENSEMBLE_METHODS:
        raise Failure(f"--method must be mean, nelder-mead, greedy or stacking, not {method!r}.")
    client = _client(ctx)
    ensemble = client.create_ensemble(refs, method=method, name=name, greedy_rounds=greedy_rounds, seed=seed)
    if wait:
        (ensemble,) = _wait_all(ctx, client, [ensemble], _output(ctx, output) == "json")
        if "members" not in ensemble and ensemble.get("id") is not None:
            try:
                ensemble = {**client.get_ensemble(ensemble["id"]), **ensemble}
            except TuneboardAPIError:
                pass
    _show_ensemble(ctx, output, ensemble)
    if wait and ensemble.get("status") != "completed":
        typer.echo(f"Error: ensemble {ensemble.get('id')} {ensemble.get('status')}: "
                   f"{ensemble.get('error') or 'no reason given'}", err=True)
        raise typer.Exit(1)


def _member_ok(ref: str) -> bool:
    kind, _, ident = ref.partition(":")
    return kind in ("model", "trial") and ident.isdigit()


def _show_ensemble(ctx: typer.Context, output: str | None, ensemble: dict) -> None:
    def show():
        _details(ensemble, [k for k in ("id", "name", "version", "method", "status", "val_metrics", "test_metrics",
                                        "weights", "error") if ensemble.get(k) not in (None, "", {}, [])])
        members = ensemble.get("members")
        if isinstance(members, list) and members and isinstance(members[0], dict):
            _table(members, [("MEMBER", lambda m: m.get("key") or m.get("ref")), ("LABEL", lambda m: m.get("label")),
                             ("WEIGHT", lambda m: m.get("weight"))])

    _emit(ctx, output, ensemble, show)


@ensembles_app.command("show")
@_errors
def ensembles_show(ctx: typer.Context, ensemble_id: int, output: OutputOption = None):
    """One ensemble: members, weights, metrics."""
    _show_ensemble(ctx, output, _client(ctx).get_ensemble(ensemble_id))

