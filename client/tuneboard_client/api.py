"""A small httpx client for Tuneboard's REST API v1 (/api/v1/).

Every failed call raises `TuneboardAPIError` with the server's own message ("detail", and
"field" when one field is at fault); lists follow the "next" links of the paginated
answers; downloads stream to a file and are refused unless their SHA-256 matches the
server's X-Content-SHA256 header."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from tuneboard_client.variants import VARIANT_METHODS, VariantCalls  # noqa: F401 - part of the API

API_PREFIX = "/api/v1/"
TEAM_HEADER = "X-Tuneboard-Team"
PAGE_SIZE = 100

STUDY_ACTIVE = ("created", "running")
STUDY_ENDED = ("completed", "failed", "cancelled")
JOB_ACTIVE = ("queued", "running")
MODEL_FORMATS = ("keras", "savedmodel", "tflite", "tflite_int8")
ENSEMBLE_METHODS = ("mean", "nelder_mead", "greedy", "stacking")


class TuneboardAPIError(Exception):
    """A refused or failed call: `message` is what the server said, ready to show a person."""

    def __init__(self, message: str, *, status: int | None = None, field: str | None = None,
                 errors: dict | None = None):
        self.message = message
        self.status = status
        self.field = field
        self.errors = errors or {}
        super().__init__(self.describe())

    def describe(self) -> str:
        text = self.message
        if self.field and not text.lower().startswith((self.field.lower(), self.field.replace("_", " ").lower())):
            text = f"{self.field}: {text}"
        others = []
        for name, messages in self.errors.items():
            for message in messages if isinstance(messages, list) else [messages]:
                line = f"{name}: {message}" if name not in ("__all__", "non_field_errors", None) else str(message)
                if str(message) not in text and line not in others:
                    others.append(line)
        return "\n".join([text, *others])


def _error_from_response(response: httpx.Response) -> TuneboardAPIError:
    status = response.status_code
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and (body.get("detail") or body.get("errors")):
        errors = body.get("errors") if isinstance(body.get("errors"), dict) else {}
        detail = body.get("detail")
        if not detail:  # only field errors: the first one leads
            name, messages = next(iter(errors.items()))
            detail = messages[0] if isinstance(messages, list) and messages else str(messages)
        return TuneboardAPIError(str(detail), status=status, field=body.get("field"), errors=errors)
    if isinstance(body, dict) and body:  # DRF's plain {field: [messages]} validation errors
        name, messages = next(iter(body.items()))
        first = messages[0] if isinstance(messages, list) and messages else str(messages)
        return TuneboardAPIError(str(first), status=status, field=name,
                                 errors={k: v for k, v in body.items() if k != name})
    try:
        text = response.text.strip()
    except httpx.ResponseNotRead:
        text = ""
    hint = {401: "The token was refused: it may be wrong, expired or revoked (run `tuneboard login`).",
            403: "Your role on this team does not allow this.",
            404: "Not found (or it belongs to another team)."}.get(status)
    message = hint or f"The server answered {status} {response.reason_phrase}."
    if text and not hint and len(text) < 300 and "<html" not in text.lower():
        message += f" {text}"
    return TuneboardAPIError(message, status=status)


class Client(VariantCalls):
    """Tuneboard's API for one user (the token's) on one team (the token's; `team` must name it)."""

    def __init__(self, base_url: str, token: str, team: int | str | None = None, *,
                 transport: httpx.BaseTransport | None = None, timeout: float = 60.0):
        if not base_url:
            raise TuneboardAPIError("No server URL: set TUNEBOARD_URL or run `tuneboard login`.")
        if not token:
            raise TuneboardAPIError("No API token: set TUNEBOARD_TOKEN or run `tuneboard login`.")
        base = base_url.strip().rstrip("/")
        if base.endswith(API_PREFIX.rstrip("/")):
            base = base[: -len(API_PREFIX.rstrip("/"))]
        if "://" not in base:
            base = f"http://{base}"
        self.origin = base
        self.api_root = base + API_PREFIX
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json",
                   "User-Agent": "tuneboard-client/0.1"}
        if team not in (None, ""):
            headers[TEAM_HEADER] = str(team)
        self._http = httpx.Client(headers=headers, transport=transport, timeout=timeout)

    # --- plumbing ------------------------------------------------------------------------

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def url(self, path: str) -> str:
        """An absolute URL from an API path ("studies/3/"), a site path ("/api/v1/...") or a URL."""
        if path.startswith(("http://", "https://")):
            return path
        if path.startswith("/"):
            return self.origin + path
        return self.api_root + path

    def _send(self, method: str, path: str, **kwargs) -> httpx.Response:
        url = self.url(path)
        try:
            response = self._http.request(method, url, **kwargs)
        except httpx.TimeoutException as exc:
            raise TuneboardAPIError(f"{self.origin} did not answer in time ({exc.__class__.__name__}).") from exc
        except httpx.HTTPError as exc:
            raise TuneboardAPIError(f"Cannot reach {self.origin}: {exc}") from exc
        if response.status_code >= 400:
            raise _error_from_response(response)
        return response

    def request(self, method: str, path: str, **kwargs) -> Any:
        response = self._send(method, path, **kwargs)
        if response.status_code == 204 or not response.content:
            return None
        if "json" not in response.headers.get("content-type", "json"):
            return response.text
        try:
            return response.json()
        except ValueError as exc:
            raise TuneboardAPIError(f"The server sent something that is not JSON from {response.url}.",
                                    status=response.status_code) from exc

    def get(self, path: str, **params) -> Any:
        # None, not {}: httpx replaces a URL's query (a "next" link's) with any params given.
        return self.request("GET", path, params=_clean(params) or None)

    def post(self, path: str, payload: dict | None = None) -> Any:
        return self.request("POST", path, json=payload or {})

    def paginate(self, path: str, *, limit: int | None = None, **params) -> Iterator[dict]:
        """Every row of a paginated list, following "next" (at most `limit` rows)."""
        params = _clean({"page_size": PAGE_SIZE, **params})
        url: str | None = path
        seen = 0
        while url:
            page = self.request("GET", url, params=params)
            params = None  # "next" carries the query
            if isinstance(page, list):  # an unpaginated list
                rows, url = page, None
            else:
                rows, url = page.get("results", []), page.get("next")
            for row in rows:
                yield row
                seen += 1
                if limit is not None and seen >= limit:
                    return

    # --- datasets ------------------------------------------------------------------------

    def list_datasets(self, **filters) -> list[dict]:
        return list(self.paginate("datasets/", **filters))

    def get_dataset(self, dataset_id: int) -> dict:
        return self.get(f"datasets/{int(dataset_id)}/")

    def create_bundled_dataset(self, bundled_name: str, name: str | None = None) -> dict:
        return self.post("datasets/", {"bundled_name": bundled_name, "name": name or bundled_name})

    def resolve_dataset(self, ref: int | str) -> int:
        """A dataset id from an id (12, "12") or a dataset name of the current team."""
        if isinstance(ref, bool):
            raise TuneboardAPIError(f"dataset must be an id or a name, not {ref}.", field="dataset")
        if isinstance(ref, int) or (isinstance(ref, str) and ref.strip().isdigit()):
            return int(ref)
        name = str(ref).strip()
        matches = [d for d in self.paginate("datasets/", q=name) if d.get("name") == name]
        if not matches:
            raise TuneboardAPIError(f"No dataset named {name!r} on this team (`tuneboard datasets list` shows them).",
                                    field="dataset")
        if len(matches) > 1:
            ids = ", ".join(str(d["id"]) for d in matches)
            raise TuneboardAPIError(f"{len(matches)} datasets are named {name!r} (ids {ids}): give the id instead.",
                                    field="dataset")
        return int(matches[0]["id"])

    # --- studies -------------------------------------------------------------------------

    def list_studies(self, *, limit: int | None = None, **filters) -> list[dict]:
        return list(self.paginate("studies/", limit=limit, **filters))

    def get_study(self, study_id: int) -> dict:
        return self.get(f"studies/{int(study_id)}/")

    def create_study(self, fields: dict, *, start: bool = False) -> dict:
        return self.post("studies/", {**fields, "start": bool(start)})

    def study_action(self, study_id: int, action: str) -> dict:
        """POST one of a study's lifecycle actions: start, cancel or resume."""
        return self.post(f"studies/{int(study_id)}/{action}/")

    def set_budget(self, study_id: int, *, max_trials: int | None = None, parallelism: int | None = None) -> dict:
        return self.request("PATCH", f"studies/{int(study_id)}/budget/",
                            json=_clean({"max_trials": max_trials, "parallelism": parallelism}))

    def extend_study(self, study_id: int, **changes) -> dict:  # max_trials, epochs, stop_device_hours, tuner
        return self.post(f"studies/{int(study_id)}/extend/", _clean(changes))

    def clone_study(self, study_id: int, name: str) -> dict:
        return self.post(f"studies/{int(study_id)}/clone/", {"name": name})

    def watch_study(self, study_id: int, *, interval: float = 2.0, timeout: float | None = None,
                    on_poll: Callable[[dict], None] | None = None, sleep: Callable[[float], None] = time.sleep) -> dict:
        """Poll the study until it is no longer running; returns its last detail."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            study = self.get_study(study_id)
            if on_poll:
                on_poll(study)
            if study.get("status") in STUDY_ENDED:
                return study
            if study.get("status") == "created":
                raise TuneboardAPIError(f"Study {study_id} has not been started "
                                        f"(`tuneboard studies start {study_id}`).")
            if deadline is not None and time.monotonic() > deadline:
                raise TuneboardAPIError(f"Study {study_id} is still {study.get('status')} after {timeout:.0f}s.")
            sleep(interval)

    # --- trials --------------------------------------------------------------------------

    def list_trials(self, study_id: int, *, limit: int | None = None, **filters) -> list[dict]:
        return list(self.paginate(f"studies/{int(study_id)}/trials/", limit=limit, **filters))

    def new_trials(self, study_id: int, after: int | None = None, **filters) -> list[dict]:
        """Trials created since trial pk `after` (all of them when None), in pk order."""
        return list(self.paginate(f"studies/{int(study_id)}/trials/", after=after, **filters))

    def get_trial(self, study_id: int, trial_pk: int) -> dict:
        return self.get(f"studies/{int(study_id)}/trials/{int(trial_pk)}/")

    def trial_epochs(self, study_id: int, trial_pk: int) -> list[dict]:
        return list(self.paginate(f"studies/{int(study_id)}/trials/{int(trial_pk)}/epochs/"))

    # --- models and ensembles ------------------------------------------------------------

    def request_models(self, study_id: int, *, top_n: int | None = None, trial: int | None = None,
                       method: str = "retrain", epoch_source: str | None = None, epoch_cap: int | None = None,
                       name: str | None = None) -> list[dict]:
        """Retrain (or promote) the study's top N trials, or one trial; returns the queued models."""
        if (top_n is None) == (trial is None):
            raise TuneboardAPIError("Give either top_n or trial.")
        body = self.post(f"studies/{int(study_id)}/models/", _clean({
            "top_n": top_n, "trial": trial, "method": method, "epoch_source": epoch_source, "epoch_cap": epoch_cap,
            "name": name}))
        return list(body.get("models", [])) if isinstance(body, dict) else list(body or [])

    def list_models(self, *, limit: int | None = None, **filters) -> list[dict]:
        return list(self.paginate("models/", limit=limit, **filters))

    def get_model(self, model_id: int) -> dict:
        return self.get(f"models/{int(model_id)}/")

    def create_ensemble(self, members: list[str], *, method: str = "mean", name: str | None = None,
                        greedy_rounds: int | None = None, seed: int | None = None) -> dict:
        return self.post("ensembles/", _clean({"members": list(members), "method": normalise_method(method),
                                               "name": name, "greedy_rounds": greedy_rounds, "seed": seed}))

    def get_ensemble(self, ensemble_id: int) -> dict:
        return self.get(f"ensembles/{int(ensemble_id)}/")

    def wait_model(self, model: dict | int, *, interval: float = 2.0, timeout: float | None = None,
                   on_poll: Callable[[dict], None] | None = None,
                   sleep: Callable[[float], None] = time.sleep) -> dict:
        """Poll a model (or ensemble) until it is neither queued nor running; returns its detail."""
        path = f"models/{int(model)}/" if not isinstance(model, dict) else (
            model.get("url") or f"models/{int(model['id'])}/")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            current = self.get(path)
            if on_poll:
                on_poll(current)
            if current.get("status") not in JOB_ACTIVE:
                return current
            if deadline is not None and time.monotonic() > deadline:
                raise TuneboardAPIError(f"Model {current.get('id')} is still {current.get('status')} "
                                        f"after {timeout:.0f}s.")
            sleep(interval)

    def download_model(self, model_id: int, fmt: str, destination: str | os.PathLike) -> Path:
        """Stream one export of a model to `destination` (a file, or a directory for the server's file name);
        refused, nothing left behind, unless its size and SHA-256 match Content-Length and X-Content-SHA256."""
        if fmt not in MODEL_FORMATS:
            raise TuneboardAPIError(f"Unknown format {fmt!r}: use one of {', '.join(MODEL_FORMATS)}.",
                                    field="format")
        suffix = {"keras": ".keras", "savedmodel": ".zip", "tflite": ".tflite", "tflite_int8": "-int8.tflite"}[fmt]
        return self._download_checked(f"models/{int(model_id)}/download/{fmt}/", destination,
                                      fallback=f"model-{model_id}{suffix}")

    def _download_checked(self, path: str, destination: str | os.PathLike, *, fallback: str) -> Path:
        """Stream `path` to `destination` (a file, or a directory for the server's file name,
        else `fallback`), kept only if its size and SHA-256 match what the server announced."""
        url = self.url(path)
        destination = Path(destination)
        try:
            with self._http.stream("GET", url) as response:
                if response.status_code >= 400:
                    response.read()
                    raise _error_from_response(response)
                expected_sha = (response.headers.get("X-Content-SHA256") or "").strip().lower()
                if not expected_sha:
                    raise TuneboardAPIError("The server sent no X-Content-SHA256 header: the download cannot "
                                            "be checked, so it was not saved.")
                if destination.is_dir():
                    destination = destination / _filename(response, fallback)
                destination.parent.mkdir(parents=True, exist_ok=True)
                partial = destination.with_name(destination.name + ".part")
                digest, size = hashlib.sha256(), 0
                try:
                    with open(partial, "wb") as out:
                        for chunk in response.iter_bytes():
                            digest.update(chunk)
                            size += len(chunk)
                            out.write(chunk)
                    expected_size = response.headers.get("Content-Length")
                    if expected_size is not None and int(expected_size) != size:
                        raise TuneboardAPIError(f"The download stopped early: {size} of {expected_size} bytes; "
                                                "nothing was saved.")
                    if digest.hexdigest() != expected_sha:
                        raise TuneboardAPIError(f"Checksum mismatch: the file's SHA-256 is {digest.hexdigest()}, "
                                                f"the server announced {expected_sha}; nothing was saved.")
                    os.replace(partial, destination)
                finally:
                    partial.unlink(missing_ok=True)
        except httpx.HTTPError as exc:
            raise TuneboardAPIError(f"The download from {self.origin} failed: {exc}") from exc
        return destination

    # --- batch predictions ---------------------------------------------------------------

    def create_prediction(self, input_path: str | os.PathLike, *, model: int | None = None,
                          reference: str | None = None, variant: int | None = None) -> dict:
        """Upload inputs without labels for a model id or a registry reference (name@alias), optionally to be
        predicted by one of the model's made quantized variants."""
        if (model is None) == (not reference):
            raise TuneboardAPIError("Give either a model id or a registry reference (name@alias).")
        path = Path(input_path)
        with open(path, "rb") as handle:
            fields = {"model": model, "reference": reference, "variant": variant}
            return self.request("POST", "predictions/", data=_clean(fields), files={"file": (path.name, handle)})

    def get_prediction(self, prediction_id: int) -> dict:
        return self.get(f"predictions/{int(prediction_id)}/")

    def cancel_prediction(self, prediction_id: int) -> dict:
        return self.post(f"predictions/{int(prediction_id)}/cancel/")

    def wait_prediction(self, prediction: dict, *, interval: float = 2.0,
                        on_poll: Callable[[dict], None] | None = None,
                        sleep: Callable[[float], None] = time.sleep) -> dict:
        """Poll a prediction job until it is neither queued nor running; returns its detail."""
        current = prediction
        while True:
            current = self.get(current.get("url") or f"predictions/{int(current['id'])}/")
            if on_poll:
                on_poll(current)
            if current.get("status") not in JOB_ACTIVE:
                return current
            sleep(interval)

    def download_prediction(self, prediction_id: int, fmt: str, destination: str | os.PathLike) -> Path:
        """The predictions as csv or npz, checked as model downloads are."""
        if fmt not in ("csv", "npz"):
            raise TuneboardAPIError(f"Unknown format {fmt!r}: use csv or npz.", field="format")
        return self._download_checked(f"predictions/{int(prediction_id)}/download/{fmt}/", destination,
                                      fallback=f"predictions-{prediction_id}.{fmt}")

    # --- leaderboard and workers ---------------------------------------------------------

    def leaderboard(self, dataset: int | str, **params) -> dict:
        """The ranking (metric, direction, ...) with every row in "results", all pages followed."""
        board = self.get(f"leaderboard/{self.resolve_dataset(dataset)}/", page_size=PAGE_SIZE, **params)
        if isinstance(board, dict) and "results" in board:
            rows, following = list(board["results"]), board.get("next")
            while following:
                page = self.get(following)
                rows += page.get("results", [])
                following = page.get("next")
            board = {**board, "results": rows, "next": None, "previous": None}
        return board

    def leaderboard_csv(self, dataset: int | str) -> str:
        return self._send("GET", f"leaderboard/{self.resolve_dataset(dataset)}/", params={"format": "csv"}).text

    def list_workers(self) -> list[dict]:
        return list(self.paginate("workers/"))

    # --- the model registry ----------------------------------------------------------------

    def list_registered_models(self) -> list[dict]:
        return list(self.paginate("registry/"))

    def resolve_registered_model(self, ref: int | str) -> int:
        """A registered model's id from its id or its name."""
        if isinstance(ref, int) or str(ref).isdigit():
            return int(ref)
        for row in self.list_registered_models():
            if row.get("name") == ref:
                return int(row["id"])
        raise TuneboardAPIError(f"No registered model named {ref!r} in this team (see `tuneboard registry list`).",
                                status=404)

    def get_registered_model(self, ref: int | str) -> dict:
        return self.get(f"registry/{self.resolve_registered_model(ref)}/")

    def register_model(self, model_id: int, name: str, description: str | None = None, variant: int | None = None):
        """Register a finished model, or one of its made quantized variants, as the next version of `name`."""
        body = {"model": int(model_id), "name": name, "description": description, "variant": variant}
        return self.post("registry/", _clean(body))

    def _alias_path(self, ref: int | str, alias: str) -> str:
        # The alias as one path segment: a typed `../../studies/3` must stay an (invalid) alias,
        # not become another endpoint once the URL's dot segments are resolved.
        return f"registry/{self.resolve_registered_model(ref)}/aliases/{quote(alias, safe='').replace('.', '%2E')}/"

    def set_alias(self, ref: int | str, alias: str, version: int) -> dict:
        return self.request("PUT", self._alias_path(ref, alias), json={"version": int(version)})

    def remove_alias(self, ref: int | str, alias: str) -> dict:
        return self.request("DELETE", self._alias_path(ref, alias))

    def rollback_alias(self, ref: int | str, alias: str) -> dict:
        """Roll back the alias's latest move (recorded as a new move)."""
        registered = self.get_registered_model(ref)
        latest = next((m for m in registered.get("moves", []) if m.get("alias") == alias), None)
        if latest is None:
            raise TuneboardAPIError(f"{registered.get('name')}@{alias} has never moved: nothing to roll back.")
        return self.post(latest["rollback_url"])

    # --- ensemble recipes (names resolved by the CLI: tuneboard_client/cli/recipes.py) ---------

    def list_recipes(self) -> list[dict]:
        return list(self.paginate("recipes/"))

    def get_recipe(self, recipe_id: int) -> dict:
        return self.get(f"recipes/{int(recipe_id)}/")

    def create_recipe(self, fields: dict) -> dict:
        """A recipe from its fields (those left out take the form's defaults)."""
        return self.post("recipes/", _clean(fields))

    def clone_recipe(self, recipe_id: int, name: str) -> dict:
        return self.post(f"recipes/{int(recipe_id)}/clone/", {"name": name})

    def recipe_preview(self, recipe_id: int) -> dict:
        return self.get(f"recipes/{int(recipe_id)}/preview/")

    def recipe_runs(self, recipe_id: int) -> list[dict]:
        return list(self.paginate(f"recipes/{int(recipe_id)}/runs/"))

    def run_recipe(self, recipe_id: int, reason: str | None = None) -> dict:
        return self.post(f"recipes/{int(recipe_id)}/runs/", _clean({"reason": reason}))


def normalise_method(method: str) -> str:
    """"nelder-mead", "Nelder Mead" -> "nelder_mead"."""
    return method.strip().lower().replace("-", "_").replace(" ", "_")


def _clean(params: dict | None) -> dict:
    return {k: v for k, v in (params or {}).items() if v is not None and v != ""}


def _filename(response: httpx.Response, fallback: str) -> str:
    disposition = response.headers.get("Content-Disposition", "")
    for part in disposition.split(";"):
        key, _, value = part.strip().partition("=")
        if key.lower() == "filename" and value:
            name = os.path.basename(value.strip().strip('"'))
            if name:
                return name
    return fallback
