"""A fake of Tuneboard's REST API v1 for the client's unit tests: an httpx.MockTransport
answering as /work/notes/api-contract.md says (paginated lists with absolute "next" links,
{"detail", "field", "errors"} errors, 202 + "url" for long operations, downloads with
Content-Length and X-Content-SHA256). Its page size is capped at 2 so that every list
really has to follow "next"."""

from __future__ import annotations

import hashlib
import io
import json
import re
import zipfile
from urllib.parse import urlencode

import httpx

TOKEN = "secret-token"
ORIGIN = "http://tuneboard.test"
HYPERMODELS = ("dense", "tiny", "cnn")


def error(status: int, detail: str, field: str | None = None) -> httpx.Response:
    return httpx.Response(status, json={"detail": detail, "field": field,
                                        "errors": {field: [detail]} if field else {}})


def savedmodel_zip(name: str = "iris-dense", version: int = 1) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr(f"{name}/{version}/saved_model.pb", b"\x08\x01fake-graph")
        zf.writestr(f"{name}/{version}/variables/variables.index", b"index")
    return buffer.getvalue()


class FakeTuneboard:
    max_page_size = 2

    def __init__(self):
        self.requests: list[httpx.Request] = []
        self.datasets = {1: {"id": 1, "name": "iris", "kind": "tabular", "task": "classification"},
                         2: {"id": 2, "name": "twin", "kind": "tabular", "task": "regression"},
                         3: {"id": 3, "name": "twin", "kind": "tabular", "task": "regression"}}
        self.studies: dict[int, dict] = {}
        # study id -> the (status, completed, failed, running) each GET of the detail moves through
        self.study_script: dict[int, list[tuple[str, int, int, int]]] = {}
        self.trials: dict[int, list[dict]] = {}
        self.models: dict[int, dict] = {}
        self.model_script: dict[int, list[str]] = {}
        self.files: dict[tuple[int, str], bytes] = {}
        self.corrupt_downloads = False
        self.created_payloads: list[dict] = []
        # Batch predictions: each GET of a job moves it through its script of (status, rows_done).
        self.predictions: dict[int, dict] = {}
        self.prediction_script: list[tuple[str, int]] = [("queued", 0), ("running", 2), ("completed", 3)]
        self.prediction_uploads: list[bytes] = []
        self._next_id = 100

    # --- helpers -------------------------------------------------------------------------

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def add_study(self, name: str, status: str = "created", max_trials: int = 4, **extra) -> dict:
        study_id = self.new_id()
        study = {"id": study_id, "url": f"/api/v1/studies/{study_id}/", "name": name, "status": status,
                 "dataset": 1, "hypermodel": "dense", "tuner": "random", "max_trials": max_trials,
                 "progress": {"completed": 0, "failed": 0, "running": 0, "total": 0, "max_trials": max_trials},
                 "best_trial": None, "message": "", **extra}
        self.studies[study_id] = study
        self.trials[study_id] = []
        return study

    def add_trial(self, study_id: int, number: int, val_accuracy: float, status: str = "completed") -> dict:
        trial = {"id": self.new_id(), "number": number, "status": status, "score": val_accuracy, "best_epoch": 2,
                 "metrics": {"val_accuracy": val_accuracy, "val_loss": 1 - val_accuracy},
                 "hyperparameters": {"units": 8 * number, "tuner/epochs": 2}}
        self.trials[study_id].append(trial)
        return trial

    def add_model(self, name: str, status: str = "completed", kind: str = "single", **extra) -> dict:
        model_id = self.new_id()
        model = {"id": model_id, "url": f"/api/v1/models/{model_id}/", "name": name, "version": 1, "kind": kind,
                 "method": "retrain", "status": status, "study": None, "error": "",
                 "test_metrics": {"accuracy": 0.9, "loss": 0.3}, **extra}
        self.models[model_id] = model
        return model

    def paths(self, method: str = "GET") -> list[str]:
        return [r.url.path for r in self.requests if r.method == method]

    def _page(self, request: httpx.Request, rows: list[dict]) -> httpx.Response:
        params = dict(request.url.params)
        size = min(int(params.get("page_size", 100)), self.max_page_size)
        page = int(params.get("page", 1))
        chunk = rows[(page - 1) * size: page * size]

        def link(number):
            return f"{ORIGIN}{request.url.path}?{urlencode({**params, 'page': number, 'page_size': size})}"

        return httpx.Response(200, json={
            "count": len(rows), "results": chunk,
            "next": link(page + 1) if page * size < len(rows) else None,
            "previous": link(page - 1) if page > 1 else None,
        })

    # --- the routes ----------------------------------------------------------------------

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return error(401, "Invalid token.")
        path, method = request.url.path, request.method
        params = dict(request.url.params)
        is_json = request.headers.get("Content-Type", "application/json").startswith("application/json")
        body = json.loads(request.content) if request.content and method != "GET" and is_json else {}
        routes = [
            ("GET", r"/api/v1/datasets/", self.list_datasets),
            ("GET", r"/api/v1/datasets/(\d+)/", self.get_dataset),
            ("GET", r"/api/v1/studies/", self.list_studies),
            ("POST", r"/api/v1/studies/", self.create_study),
            ("GET", r"/api/v1/studies/(\d+)/", self.get_study),
            ("POST", r"/api/v1/studies/(\d+)/start/", self.start_study),
            ("GET", r"/api/v1/studies/(\d+)/trials/", self.list_trials),
            ("GET", r"/api/v1/studies/(\d+)/trials/(\d+)/epochs/",
             lambda request, *_: self._page(request, [{"epoch": e, "metrics": {"loss": 1 / e}} for e in (1, 2, 3)])),
            ("POST", r"/api/v1/studies/(\d+)/models/", self.request_models),
            ("GET", r"/api/v1/models/", self.list_models),
            ("GET", r"/api/v1/models/(\d+)/", self.get_model),
            ("GET", r"/api/v1/ensembles/(\d+)/", self.get_model),
            ("GET", r"/api/v1/models/(\d+)/download/(\w+)/", self.download),
            ("POST", r"/api/v1/ensembles/", self.create_ensemble),
            ("GET", r"/api/v1/leaderboard/(\d+)/", self.leaderboard),
            ("GET", r"/api/v1/boom/", lambda *_: httpx.Response(500, text="Internal Server Error")),
            ("POST", r"/api/v1/predictions/", self.create_prediction),
            ("GET", r"/api/v1/predictions/(\d+)/", self.get_prediction),
            ("GET", r"/api/v1/predictions/(\d+)/download/(\w+)/", self.download_prediction),
        ]
        for route_method, pattern, view in routes:
            match = re.fullmatch(pattern, path)
            if match and route_method == method:
                return view(request, params, body, *match.groups())
        return error(404, "Not found.")

    def list_datasets(self, request, params, body):
        rows = [d for d in self.datasets.values() if params.get("q", "").lower() in d["name"].lower()]
        return self._page(request, rows)

    def get_dataset(self, request, params, body, dataset_id):
        dataset = self.datasets.get(int(dataset_id))
        return httpx.Response(200, json=dataset) if dataset else error(404, "No such dataset.")

    def list_studies(self, request, params, body):
        rows = sorted(self.studies.values(), key=lambda s: -s["id"])
        if params.get("status"):
            rows = [s for s in rows if s["status"] == params["status"]]
        return self._page(request, rows)

    def create_study(self, request, params, body):
        self.created_payloads.append(body)
        if body.get("hypermodel") not in HYPERMODELS:
            return error(400, f"Unknown hypermodel {body.get('hypermodel')!r}: choose one of "
                              f"{', '.join(HYPERMODELS)}.", "hypermodel")
        if int(body.get("dataset", 0)) not in self.datasets:
            return error(400, "Select a valid choice. That choice is not one of the available choices.", "dataset")
        study = self.add_study(body["name"], status="running" if body.get("start") else "created",
                               max_trials=body.get("max_trials", 10))
        return httpx.Response(202 if body.get("start") else 201, json=study)

    def get_study(self, request, params, body, study_id):
        study = self.studies.get(int(study_id))
        if study is None:
            return error(404, "Not found.")
        script = self.study_script.get(study["id"])
        if script:
            status, completed, failed, running = script.pop(0)
            study["status"] = status
            study["progress"].update(completed=completed, failed=failed, running=running,
                                     total=completed + failed + running)
            if completed:
                study["best_trial"] = {"id": 7, "number": 1, "score": 0.95}
            if status == "failed":
                study["message"] = "3 trials in a row failed."
        return httpx.Response(200, json=study)

    def start_study(self, request, params, body, study_id):
        study = self.studies[int(study_id)]
        if study["status"] == "running":
            return error(409, "This study is already running.")
        study["status"] = "running"
        return httpx.Response(202, json={**study, "url": study["url"]})

    def list_trials(self, request, params, body, study_id):
        rows = list(self.trials.get(int(study_id), []))
        if "after" in params:
            rows = sorted((t for t in rows if t["id"] > int(params["after"])), key=lambda t: t["id"])
        ordering = params.get("ordering")
        if ordering:
            key = ordering.lstrip("-")
            rows.sort(key=lambda t: t["metrics"].get(key, t.get(key)), reverse=ordering.startswith("-"))
        return self._page(request, rows)

    def request_models(self, request, params, body, study_id):
        if int(study_id) not in self.studies:
            return error(404, "Not found.")
        top = body.get("top_n", 1)
        models = []
        for rank in range(top):
            model = self.add_model(body.get("name") or "retrained", status="queued", study=int(study_id),
                                   method=body.get("method", "retrain"))
            self.model_script[model["id"]] = ["running", "completed"] if rank else ["queued", "running", "completed"]
            models.append(model)
        return httpx.Response(202, json={"url": f"/api/v1/models/?study={study_id}", "models": models})

    def list_models(self, request, params, body):
        rows = sorted(self.models.values(), key=lambda m: -m["id"])
        if params.get("kind"):
            rows = [m for m in rows if m["kind"] == params["kind"]]
        return self._page(request, rows)

    def get_model(self, request, params, body, model_id):
        model = self.models.get(int(model_id))
        if model is None:
            return error(404, "Not found.")
        script = self.model_script.get(model["id"])
        if script:
            model["status"] = script.pop(0)
            if model["status"] == "failed":
                model["error"] = "The worker ran out of memory."
        return httpx.Response(200, json=model)

    def create_ensemble(self, request, params, body):
        self.created_payloads.append(body)
        if body.get("method") not in ("mean", "nelder_mead", "greedy", "stacking"):
            return error(400, f"{body.get('method')!r} is not a valid choice.", "method")
        model = self.add_model(body.get("name") or "ensemble", status="queued", kind="ensemble",
                               method=body["method"], members=[{"position": i, "key": m, "label": m, "weight": None}
                                        for i, m in enumerate(body["members"])])
        model["url"] = f"/api/v1/ensembles/{model['id']}/"
        self.model_script[model["id"]] = ["running", "completed"]
        return httpx.Response(202, json=model)

    def download(self, request, params, body, model_id, fmt):
        content = self.files.get((int(model_id), fmt))
        if content is None:
            return error(404, f"This model has no {fmt} export.", "format")
        sha = hashlib.sha256(content).hexdigest()
        if self.corrupt_downloads:
            sha = hashlib.sha256(b"something else").hexdigest()
        suffix = {"savedmodel": ".zip", "keras": ".keras"}.get(fmt, ".tflite")
        return httpx.Response(200, content=content, headers={
            "Content-Type": "application/octet-stream", "Content-Length": str(len(content)),
            "X-Content-SHA256": sha, "Content-Disposition": f'attachment; filename="model-{model_id}{suffix}"'})

    def leaderboard(self, request, params, body, dataset_id):
        rows = [{"rank": 1, "id": 5, "label": "best v1", "kind": "Retrained", "test": 0.97, "val": 0.95,
                 "study": "s", "warning": ""},
                {"rank": 3, "id": 7, "label": "third v1", "kind": "Retrained", "test": 0.90, "val": 0.91,
                 "study": "s", "warning": "Reached the epoch cap."},
                {"rank": 2, "id": 6, "label": "other v2", "kind": "Ensemble: mean", "test": 0.93, "val": 0.94,
                 "study": "", "warning": ""}]
        if params.get("format") == "csv":
            return httpx.Response(200, text="rank,id,label\n1,5,best v1\n2,6,other v2\n",
                                  headers={"Content-Type": "text/csv"})
        page = self._page(request, rows)
        return httpx.Response(200, json={"dataset": int(dataset_id), "metric": "accuracy", "direction": "max",
                                         **json.loads(page.content)})

    # --- batch predictions ---------------------------------------------------------------

    def create_prediction(self, request, params, body):
        content = request.read()
        self.prediction_uploads.append(content)
        reference = b'name="reference"' in content
        if b'name="model"\r\n\r\n999' in content or (reference and b"iris@nowhere" in content):
            return error(400, "Reference: The registered model 'iris' has no alias 'nowhere' in this team.",
                         "reference")
        job = {"id": self.new_id(), "status": "queued", "model": 7, "rows": 3, "rows_done": 0, "error": "",
               "requested_as": "iris@production" if reference else "", "registry_version": 2 if reference else None,
               "downloads": {}}
        job["url"] = f"{ORIGIN}/api/v1/predictions/{job['id']}/"
        self.predictions[job["id"]] = {"job": job, "script": list(self.prediction_script)}
        return httpx.Response(202, json=job)

    def get_prediction(self, request, params, body, prediction_id):
        entry = self.predictions.get(int(prediction_id))
        if entry is None:
            return error(404, "Not found (or not in your current team).")
        if entry["script"]:
            status, done = entry["script"].pop(0)
            entry["job"].update(status=status, rows_done=done)
            if status == "failed":
                entry["job"]["error"] = "The worker ran out of memory."
        return httpx.Response(200, json=entry["job"])

    def download_prediction(self, request, params, body, prediction_id, fmt):
        content = {"csv": b"row,label,setosa,versicolor\n1,setosa,0.9,0.1\n", "npz": b"PK fake npz"}[fmt]
        return httpx.Response(200, content=content, headers={
            "Content-Type": "text/csv", "Content-Length": str(len(content)),
            "X-Content-SHA256": hashlib.sha256(content).hexdigest(),
            "Content-Disposition": f'attachment; filename="predictions-{prediction_id}.{fmt}"'})
