"""The web process never imports TensorFlow, Keras or KerasTuner: a fresh interpreter
serves every page of the project (and the admin) and none of them is in sys.modules."""

from pathlib import Path

from django.contrib import admin
from django.urls import URLPattern, URLResolver, get_resolver

from tests.web.fresh_process import run_in_fresh_process

HEAVY = ("tensorflow", "keras", "keras_tuner")

# Runs in a fresh interpreter against its own SQLite database; prints RESULT: + JSON.
SCRIPT = r"""
import io, json, sys
import django

django.setup()
from django.test.utils import setup_test_environment

setup_test_environment()  # lets the test client's "testserver" host through ALLOWED_HOSTS

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from experiments.models import Artifact, ModelFile, ServingExport, Study, TrainedModel, Trial, TrialEpoch, Worker
from experiments.services.artifacts import artifact_create
from experiments.services.datasets import dataset_create_bundled
from experiments.services.studies import study_create
from experiments.services.memberships import membership_add
from experiments.services.teams import team_create

call_command("migrate", verbosity=0, interactive=False)

user = get_user_model().objects.create_superuser("alice", "alice@example.com", "correct horse")
team = team_create(name="Acme", owner=user)
dataset = dataset_create_bundled(team=team, user=user, bundled_name="iris")
space = [
    {"name": "units", "type": "int", "min": 4, "max": 16, "step": 4, "sampling": "linear",
     "parent": None, "parent_values": []},
    {"name": "learning_rate", "type": "float", "min": 0.001, "max": 0.1, "step": None,
     "sampling": "log", "parent": None, "parent_values": []},
]
# Two objectives, so its Pareto front (page and API) is served too.
study = study_create(team=team, user=user, dataset=dataset, name="study", hypermodel="dense",
                     search_space=space, objective_metric="val_accuracy", objective_direction="max",
                     extra_objectives=[{"metric": "params", "direction": "min"}])
trial = Trial.objects.create(study=study, trial_id="0", number=1, status=Trial.Status.COMPLETED,
                             hyperparameters={"units": 8, "learning_rate": 0.01}, score=0.9,
                             metrics={"val_accuracy": 0.9, "params": 1234.0})
TrialEpoch.objects.create(trial=trial, epoch=0, metrics={"loss": 0.5, "val_accuracy": 0.9})
# A second study of the dataset, with enough trials for the comparison's importance.
study_b = study_create(team=team, user=user, dataset=dataset, name="study b", hypermodel="dense",
                       search_space=space, objective_metric="val_accuracy", objective_direction="max")
for number in range(1, 7):
    Trial.objects.create(study=study_b, trial_id=str(number - 1), number=number, status=Trial.Status.COMPLETED,
                         hyperparameters={"units": 4 * number, "learning_rate": 0.01}, score=0.5 + number / 20,
                         metrics={"val_accuracy": 0.5 + number / 20})
Worker.objects.create(name="w1@host", hostname="host", pid=1, queues=["cpu"])
model = TrainedModel.objects.create(
    team=team, dataset=dataset, study=study, trial=trial, name="study", version=1, method="retrain",
    epoch_source="detect", seed=1, status="completed", test_metrics={"accuracy": 0.9}, val_metrics={"accuracy": 0.9})
ModelFile.objects.create(model=model, format="keras", artifact=artifact_create(
    team=team, kind=Artifact.Kind.MODEL, filename="study-v1.keras", fileobj=io.BytesIO(b"PK stand-in")))
# Team pages: a second member to change and remove, an invitation to open and withdraw, a
# password-reset link.
from django.contrib.auth.tokens import default_token_generator
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from experiments.services.invitations import invitation_create

viewer = get_user_model().objects.create_user("viewer", password="pw-123456789")
membership = membership_add(team=team, user=viewer, role="viewer")
invitation, token = invitation_create(team=team, email="new@example.com", role="viewer", created_by=user)
withdrawn, _ = invitation_create(team=team, email="old@example.com", role="viewer", created_by=user)
# Invitations addressed to the crawling user, one to accept and one to decline from the dashboard.
to_accept, _ = invitation_create(team=team_create(name="Invites A", owner=viewer), username="alice", role="viewer",
                                 created_by=viewer)
to_decline, _ = invitation_create(team=team_create(name="Invites B", owner=viewer), username="alice",
                                  role="viewer", created_by=viewer)
# An image dataset, whose example images are drawn in the web process.
images = dataset_create_bundled(team=team, user=user, bundled_name="digits_images")
ROUTE_IDS = {"invitation_accept_mine": {"invitation_id": to_accept.id},
             "invitation_decline": {"invitation_id": to_decline.id},
             "dataset_examples": {"dataset_id": images.id, "class_index": 0}}
ensemble = TrainedModel.objects.create(
    team=team, dataset=dataset, kind="ensemble", name="blend", version=1, method="mean", seed=1, status="completed")
from experiments.services.webhooks import webhook_create

webhook, _ = webhook_create(team=team, user=user, name="ops", url="https://93.184.215.14/hook",
                            events=["study.completed"])
# A registered model with an alias, for the registry's pages and API.
from experiments.services.registry import registry_alias_set, registry_register

TrainedModel.objects.filter(pk=model.pk).update(signature={"keras": {"inputs": [
    {"name": "features", "shape": [None, 4], "dtype": "float32"}], "outputs": []}})
model.refresh_from_db()
registered = registry_register(team=team, model=model, name="iris", user=user).registered_model
move = registry_alias_set(registered=registered, alias="production", version=1, user=user)
serving_export = ServingExport.objects.create(team=team, reason="crawl")
# An ensemble recipe over the study, for the recipes' pages and API.
from experiments.services.recipes import recipe_create

recipe = recipe_create(team=team, user=user, data={"name": "mix", "dataset": dataset, "source_studies": [study]})
ids = {"ensemble_id": ensemble.id, "queue": "cpu", "webhook_id": webhook.id, "export_id": serving_export.id,
       "registered_model_id": registered.id, "alias": "production", "move_id": move.id,
       "recipe_id": recipe.id,
       "dataset_id": dataset.id, "study_id": study.id, "trial_pk": trial.pk, "model_id": model.id, "fmt": "keras",
       "membership_id": membership.id, "invitation_id": withdrawn.id, "token": token,
       "uidb64": urlsafe_base64_encode(force_bytes(user.pk))}
PASSWORD_RESET_TOKEN = default_token_generator.make_token(user)
# A finished batch prediction: its page, live part and downloads.
from experiments.models import PredictionJob

prediction = PredictionJob.objects.create(
    team=team, model=model, rows=1, rows_done=1, status="completed", preview=[{"row": "1", "label": "setosa"}],
    inputs=artifact_create(team=team, kind=Artifact.Kind.PREDICTION_INPUTS, filename="inputs.npz",
                           fileobj=io.BytesIO(b"PK stand-in")),
    predictions_csv=artifact_create(team=team, kind=Artifact.Kind.BATCH_PREDICTIONS, filename="p.csv",
                                    fileobj=io.BytesIO(b"row,label\n1,setosa\n")))
ids["prediction_id"] = prediction.id
# A made quantized variant with its figures, and its download.
from experiments.models import ModelVariant

ids["variant_id"] = ModelVariant.objects.create(
    model=model, method="tflite_int8_full", queue="cpu", status="completed", runtime="TensorFlow Lite",
    figures={side: {"metrics": {"accuracy": 0.9, "log_loss": 0.3}, "size_bytes": 100, "latency_ms_batch1": 0.1,
                    "latency_ms_batch64": 0.01} for side in ("float", "variant")},
    artifact=artifact_create(team=team, kind=Artifact.Kind.MODEL, filename="study-v1-int8-full.tflite",
                             fileobj=io.BytesIO(b"TFL3 stand-in"))).id
ROUTE_IDS.update({name: {"prediction_id": prediction.id, "fmt": "csv"}
                  for name in ("prediction_download", "prediction-download")})
# Pages whose objects come in the query string.
QUERIES = {name: f"?studies={study.id}&studies={study_b.id}" for name in ("studies_compare", "api:study-compare")}

client = Client()
client.force_login(user)
visited, errors = [], []


def visit(name, method, path, data=None):
    try:
        headers = {"Authorization": "Bearer crawl-token"} if name == "scaling" else {}  # /scaling/<queue>/
        response = client.post(path, data or {}) if method == "POST" else client.get(path, headers=headers)
        status = response.status_code
    except Exception as exc:  # record it; the test shows which page failed and why
        status = 500
        errors.append(f"{method} {path}: {type(exc).__name__}: {exc}")
    visited.append({"name": name, "method": method, "path": path, "status": status})
    if name == "invitation_accept_mine":  # joining opened the new team: back to the one the crawl is about
        client.post(reverse("switch_team"), {"team": team.id})
    return status


def walk(patterns, namespace=None):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from walk(pattern.url_patterns, pattern.namespace or namespace)
        elif isinstance(pattern, URLPattern) and pattern.name:
            yield namespace, pattern


POST_DATA = {
    "switch_team": {"team": team.id},
    "study_budget": {"max_trials": 12, "parallelism": 2},
    "study_extend": {"max_trials": 12, "epochs": 5, "tuner": "random"},
    "api:study-extend": {"max_trials": 12},
    "study_models_request": {"top_n": 1, "method": "retrain", "epoch_source": "detect", "epoch_cap": 5},
    "trial_models_request": {"method": "promote", "epoch_source": "detect", "epoch_cap": 5},
    "team_member_add": {"identifier": "someone@example.com", "role": "viewer"},
    "team_member_role": {"role": "editor"},
    "api_tokens": {"name": "crawler", "team": team.id, "role": "owner"},
    "api:study-clone": {"name": "cloned"},
    "api:study-models": {"top_n": 1, "method": "retrain"},
    "queue_policy": {"team": team.id, "weight": 2},
    "api:queue-policy": {"team": team.id, "max_concurrent": 4},
    "model_variant_request": {"method": "keras_int8"},
    "api:model-variants": {"method": "keras_int8"},
}
needs_post = []
for namespace, pattern in walk(get_resolver().url_patterns):
    if namespace == "admin":
        continue  # visited below: index, app lists, and every registered model's pages
    try:
        kwargs = {key: {**ids, **ROUTE_IDS.get(pattern.name, {})}[key] for key in pattern.pattern.converters}
        if pattern.name == "password_reset_confirm":
            kwargs["token"] = PASSWORD_RESET_TOKEN
        full_name = f"{namespace}:{pattern.name}" if namespace else pattern.name
        path = reverse(full_name, kwargs=kwargs) + QUERIES.get(full_name, "")
    except KeyError as exc:
        errors.append(f"No object to fill {exc} of {pattern.name}")
        continue
    if visit(full_name, "GET", path) == 405:
        needs_post.append((full_name, path))

# Forms that do real work on the web side: bundled dataset, CSV upload, a started study.
csv = io.BytesIO(b"a,b,label\n" + b"".join(f"{i},{i % 7},{i % 2}\n".encode() for i in range(40)))
csv.name = "small.csv"
visit("dataset_list", "POST", reverse("dataset_list"),
      {"bundled_name": "wine", "name": "", "val_fraction": 0.15, "test_fraction": 0.15, "seed": 0})
visit("dataset_upload", "POST", reverse("dataset_upload"),
      {"name": "small", "file": csv, "target_column": "label", "task": "auto",
       "val_fraction": 0.15, "test_fraction": 0.15, "seed": 0})
visit("study_new", "POST", reverse("study_new"),
      {"name": "started", "dataset": dataset.id, "hypermodel": "dense",
       "search_space": json.dumps(space), "tuner": "random", "objective_metric": "val_accuracy",
       "objective_direction": "auto",
       "max_trials": 3, "executions_per_trial": 1, "epochs": 2, "batch_size": 32, "patience": 2,
       "seed": 1, "queue": "cpu", "parallelism": 1, "start": "1"})

visit("admin:index", "GET", reverse("admin:index"))
for app_label in sorted({model._meta.app_label for model in admin.site._registry}):
    visit("admin:app_list", "GET", reverse("admin:app_list", args=[app_label]))
for model in admin.site._registry:
    prefix = f"admin:{model._meta.app_label}_{model._meta.model_name}"
    visit(f"{prefix}_changelist", "GET", reverse(f"{prefix}_changelist"))
    # Rows workers write, and invitations (made on the team page), have no add page.
    if type(admin.site._registry[model]).has_add_permission is admin.ModelAdmin.has_add_permission:
        visit(f"{prefix}_add", "GET", reverse(f"{prefix}_add"))
    first = model._default_manager.order_by("pk").first()
    if first is not None:
        visit(f"{prefix}_change", "GET", reverse(f"{prefix}_change", args=[first.pk]))

# Actions last, in URL order (start before cancel), and logging out at the very end.
for name, path in sorted(needs_post, key=lambda item: item[0] == "logout"):
    visit(name, "POST", path, POST_DATA.get(name))

heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("tensorflow", "keras", "keras_tuner"))
running = Study.objects.filter(status=Study.Status.RUNNING).count()
result = {"visited": visited, "errors": errors, "heavy": heavy, "started": running}
print("RESULT:" + json.dumps(result))
"""


def _named_routes(patterns, namespace=None):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _named_routes(pattern.url_patterns, pattern.namespace or namespace)
        elif isinstance(pattern, URLPattern) and pattern.name:
            yield namespace, f"{namespace}:{pattern.name}" if namespace else pattern.name


def _run_web_process(tmp_path: Path) -> dict:
    return run_in_fresh_process(SCRIPT, {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'web.sqlite3'}",
        "TUNEBOARD_VAR_DIR": str(tmp_path / "var"),
        "CELERY_BROKER_URL": "memory://",  # the started study's wake-ups go nowhere
        "TUNEBOARD_SCALING_TOKEN": "crawl-token",
        # Single sign-on on, so its two routes answer (redirects; no provider is called).
        **{f"TUNEBOARD_OIDC_{name}": f"https://id.example.com/{name.lower()}" for name in (
            "AUTHORIZATION_ENDPOINT", "TOKEN_ENDPOINT", "USERINFO_ENDPOINT", "JWKS_ENDPOINT")},
        "TUNEBOARD_OIDC_CLIENT_ID": "tuneboard", "TUNEBOARD_OIDC_CLIENT_SECRET": "crawl-secret",
    }, timeout=300)


def test_the_web_serves_every_page_without_importing_tensorflow_keras_or_keras_tuner(tmp_path):
    result = _run_web_process(tmp_path)

    assert result["errors"] == []
    # GETs render (or redirect); 405 only for POST-only actions, which are then posted and
    # must succeed (a 200 after a POST would be a form error).
    expected = {"GET": (200, 302, 405), "POST": (302,)}
    # The API answers actions with JSON: created, accepted, or refused with a message (e.g.
    # starting a study the crawl already started), never a server error.
    api_expected = {"GET": (200, 405), "POST": (200, 201, 202, 400, 409)}
    failing = [v for v in result["visited"]
               if v["status"] not in (api_expected if v["name"].startswith("api:") else expected)[v["method"]]]
    assert failing == []
    assert result["started"] == 1, "the study form's 'start' ran the whole start path"
    compared = [v["status"] for v in result["visited"] if v["name"] in ("studies_compare", "api:study-compare")]
    assert compared == [200, 200], "the study comparison (scikit-learn's importance included) is really drawn"

    visited = {v["name"] for v in result["visited"] if v["status"] in (200, 302)
               or (v["name"].startswith("api:") and v["method"] == "POST" and v["status"] in api_expected["POST"])}
    project_routes = {
        name
        for namespace, name in _named_routes(get_resolver().url_patterns)
        if namespace != "admin"
    }
    assert project_routes - visited == set(), "every named route of the project is visited"
    changelists = {
        f"admin:{m._meta.app_label}_{m._meta.model_name}_changelist" for m in admin.site._registry
    }
    assert {"admin:index", *changelists} <= visited

    assert result["heavy"] == [], f"the web process imported {result['heavy'][:10]}"
    assert not any(name in result["heavy"] for name in HEAVY)
