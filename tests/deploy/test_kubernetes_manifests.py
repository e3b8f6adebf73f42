"""deploy/kubernetes renders with kubectl kustomize for every overlay, every object validates
offline (Kubernetes schemas via kubernetes-validate; KEDA objects against tests/deploy/keda/),
and the workers, their queues and their ScaledObjects agree with the app's Celery routing."""

import copy
import json
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import yaml
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from jsonschema import Draft202012Validator

from experiments.models import Study
from experiments.services.job_kinds import ENSEMBLE_QUEUE
from experiments.tuning.compute_options import DEFAULT_BACKEND, JAX_SUFFIX, TASK_QUEUES, queue_backend
from webapp.env import env_secret_key

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = ROOT / "deploy" / "kubernetes"
OVERLAYS = ["cpu-only", "gpu", "tpu", "gpu-jax", "serving"]
K8S_VERSION = "1.30"
KEDA_SCHEMAS = json.loads((Path(__file__).parent / "keda" / "schemas.json").read_text())
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


def env_secret_key_from(value: str) -> str:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SECRET_KEY", value)
        return env_secret_key("SECRET_KEY", debug=False)


def render(overlay: str) -> list[dict]:
    proc = subprocess.run([KUBECTL, "kustomize", str(KUBERNETES / "overlays" / overlay)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"kubectl kustomize {overlay} failed:\n{proc.stderr}"
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request):
    return request.param, render(request.param)


def by_kind(objects, kind):
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def container(deployment):
    return deployment["spec"]["template"]["spec"]["containers"][0]


def worker_queue(deployment) -> str:
    command = container(deployment)["command"]
    return command[command.index("-Q") + 1]


def test_every_object_validates_offline(rendered):
    _, objects = rendered
    for obj in objects:
        if obj["apiVersion"].startswith("keda.sh/"):
            errors = sorted(Draft202012Validator(KEDA_SCHEMAS[obj["kind"]]).iter_errors(obj), key=str)
            assert errors == [], f"{obj['kind']}/{obj['metadata']['name']}: {[e.message for e in errors]}"
        else:
            kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def test_the_example_secret_validates_and_holds_what_the_app_reads():
    secret = yaml.safe_load((KUBERNETES / "secret.example.yaml").read_text())
    kubernetes_validate.validate(secret, K8S_VERSION, strict=True)
    assert {"DATABASE_URL", "CELERY_BROKER_URL", "SECRET_KEY", "TUNEBOARD_SCALING_TOKEN"} <= set(secret["stringData"])
    # Applied unedited, the placeholder key stops the pods instead of signing with a public key.
    with pytest.raises(ImproperlyConfigured, match="placeholder"):
        env_secret_key_from(secret["stringData"]["SECRET_KEY"])


def test_web_beat_migrate_and_config(rendered):
    _, objects = rendered
    deployments = by_kind(objects, "Deployment")
    web = container(deployments["tuneboard-web"])
    assert web["command"][0] == "gunicorn" and web["ports"][0]["containerPort"] == 8000
    assert web["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert web["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert "tuneboard-web" in by_kind(objects, "Service")
    assert by_kind(objects, "HorizontalPodAutoscaler")["tuneboard-web"]["apiVersion"] == "autoscaling/v2"
    assert "tuneboard-web" in by_kind(objects, "PodDisruptionBudget")
    beat = deployments["tuneboard-beat"]
    assert beat["spec"]["replicas"] == 1 and beat["spec"]["strategy"]["type"] == "Recreate"
    job = by_kind(objects, "Job")["tuneboard-migrate"]
    assert container(job)["command"] == ["python", "manage.py", "migrate", "--noinput"]
    config = by_kind(objects, "ConfigMap")["tuneboard-config"]["data"]
    assert config["TUNEBOARD_ARTIFACT_STORAGE"] == "database"
    assert config["DEBUG"] == "false"  # so the pods refuse to start without the Secret's SECRET_KEY
    assert "tuneboard-web" in config["ALLOWED_HOSTS"].split(",")  # KEDA calls the web by its Service name
    # TF Serving (the serving overlay) runs its own image and reads no configuration of the app's.
    for obj in [d for name, d in deployments.items() if name != "tuneboard-tf-serving"] + [job]:
        env_from = container(obj)["envFrom"]
        assert {"configMapRef": {"name": "tuneboard-config"}} in env_from
        assert {"secretRef": {"name": "tuneboard-secrets"}} in env_from
        # JAX workers run the Dockerfile's worker-jax target (no TensorFlow), everything else the one image.
        jax = obj["metadata"]["name"].endswith(JAX_SUFFIX)
        assert container(obj)["image"] == ("tuneboard-jax:latest" if jax else "tuneboard:latest")


def test_workers_consume_real_queues_and_scaledobjects_match(rendered):
    overlay, objects = rendered
    workers = {name: d for name, d in by_kind(objects, "Deployment").items() if name.startswith("tuneboard-worker-")}
    queues = {worker_queue(d) for d in workers.values()}
    expected = {"cpu-only": {"cpu"}, "gpu": {"cpu", "gpu"}, "tpu": {"cpu", "tpu"},
                "gpu-jax": {"cpu", "gpu-jax"}, "serving": {"cpu"}}[overlay]
    assert queues == expected
    routable = set(Study.Queue.values) | set(TASK_QUEUES) | {settings.CELERY_TASK_DEFAULT_QUEUE, ENSEMBLE_QUEUE}
    assert queues <= routable
    for name, deployment in workers.items():
        queue = worker_queue(deployment)
        assert name == f"tuneboard-worker-{queue}"
        command = container(deployment)["command"]
        assert command[:4] == ["celery", "-A", "webapp", "worker"]
        assert command[command.index("--concurrency") + 1] == "1"
        assert command[command.index("--hostname") + 1] == f"{queue}@%h"
        # A worker refuses another backend's queues at start-up: its KERAS_BACKEND must be the queue's.
        env = {e["name"]: e.get("value") for e in container(deployment).get("env", [])}
        assert env.get("KERAS_BACKEND", DEFAULT_BACKEND) == queue_backend(queue), name
        pod = deployment["spec"]["template"]["spec"]
        assert pod["terminationGracePeriodSeconds"] >= 600
        limits = container(deployment)["resources"]["limits"]
        if queue.removesuffix(JAX_SUFFIX) == "gpu":
            assert limits["nvidia.com/gpu"] == 1 and pod["nodeSelector"] and pod["tolerations"]
        if queue == "tpu":
            assert "google.com/tpu" in limits and pod["nodeSelector"] and pod["tolerations"]
    scaled = by_kind(objects, "ScaledObject")
    auth = by_kind(objects, "TriggerAuthentication")
    assert {so["spec"]["scaleTargetRef"]["name"] for so in scaled.values()} == set(workers)
    for so in scaled.values():
        queue = worker_queue(workers[so["spec"]["scaleTargetRef"]["name"]])
        (trigger,) = so["spec"]["triggers"]
        assert trigger["type"] == "metrics-api"
        assert trigger["metadata"]["url"].rstrip("/") == f"http://tuneboard-web:8000/scaling/{queue}"
        assert trigger["metadata"]["valueLocation"] == "work"
        assert trigger["metadata"]["authMode"] == "bearer"
        ref = auth[trigger["authenticationRef"]["name"]]
        assert ref["spec"]["secretTargetRef"] == [
            {"parameter": "token", "name": "tuneboard-secrets", "key": "TUNEBOARD_SCALING_TOKEN"}]
        if queue != "cpu":
            assert so["spec"]["minReplicaCount"] == 0


def keda_errors(obj) -> list[str]:
    return [e.message for e in Draft202012Validator(KEDA_SCHEMAS[obj["kind"]]).iter_errors(obj)]


def base_keda(kind: str) -> dict:
    docs = yaml.safe_load_all((KUBERNETES / "base" / "keda.yaml").read_text())
    return next(copy.deepcopy(doc) for doc in docs if doc["kind"] == kind)


def _parent(obj, path):
    for key in path[:-1]:
        obj = obj[key]
    return obj


def _drop(path):
    return lambda obj: _parent(obj, path).pop(path[-1])


def _set(path, value):
    return lambda obj: _parent(obj, path).__setitem__(path[-1], value)


BROKEN_SCALED_OBJECTS = {
    "no scaleTargetRef.name": _drop(["spec", "scaleTargetRef", "name"]),
    "no scaleTargetRef": _drop(["spec", "scaleTargetRef"]),
    "no triggers": _drop(["spec", "triggers"]),
    "a trigger without type": _drop(["spec", "triggers", 0, "type"]),
    "a trigger without metadata": _drop(["spec", "triggers", 0, "metadata"]),
    "a number in trigger metadata": _set(["spec", "triggers", 0, "metadata", "targetValue"], 1),
    "minReplicaCount as a string": _set(["spec", "minReplicaCount"], "0"),
    "pollingInterval beyond int32": _set(["spec", "pollingInterval"], 2 ** 31),
    "a misspelled spec field": _set(["spec", "maxReplicas"], 4),
    "authenticationRef without name": _set(["spec", "triggers", 0, "authenticationRef"],
                                           {"kind": "TriggerAuthentication"}),
    "fallback without replicas": _set(["spec", "fallback"], {"failureThreshold": 3}),
    "an unknown fallback behavior": _set(["spec", "fallback"], {"failureThreshold": 3, "replicas": 1, "behavior": "x"}),
    "an HPA policy without periodSeconds": _set(
        ["spec", "advanced"], {"horizontalPodAutoscalerConfig": {"behavior": {"scaleDown": {
            "policies": [{"type": "Pods", "value": 1}]}}}}),
    "advanced as a list": _set(["spec", "advanced"], []),
}


@pytest.mark.parametrize("broken", list(BROKEN_SCALED_OBJECTS))
def test_a_broken_scaledobject_is_rejected(broken):
    obj = base_keda("ScaledObject")
    assert keda_errors(obj) == []
    BROKEN_SCALED_OBJECTS[broken](obj)
    assert keda_errors(obj), f"{broken} was accepted"


@pytest.mark.parametrize("broken", [
    _drop(["spec", "secretTargetRef", 0, "key"]), _set(["spec", "secretTargetRef", 0, "name"], 7),
    _set(["spec", "podIdentity"], {"provider": "azure"}), _set(["spec", "hashiCorpVault"], {}), _drop(["spec"]),
], ids=["secret ref without key", "secret name a number", "unknown pod identity", "unrestated source", "no spec"])
def test_a_broken_triggerauthentication_is_rejected(broken):
    obj = base_keda("TriggerAuthentication")
    assert keda_errors(obj) == []
    broken(obj)
    assert keda_errors(obj)


def test_the_restated_optional_fields_accept_what_keda_accepts():
    obj = base_keda("ScaledObject")
    obj["spec"].update({
        "initialCooldownPeriod": 60, "idleReplicaCount": 0,
        "fallback": {"failureThreshold": 3, "replicas": 1, "behavior": "currentReplicasIfHigher"},
        "advanced": {"restoreToOriginalReplicaCount": True, "horizontalPodAutoscalerConfig": {
            "name": "tuneboard-worker-cpu-hpa",
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 600, "selectPolicy": "Min",
                                       "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}}}},
    })
    obj["spec"]["triggers"][0].update({"name": "work", "useCachedMetrics": True})
    obj["spec"]["triggers"][0]["authenticationRef"]["kind"] = "ClusterTriggerAuthentication"
    assert keda_errors(obj) == []
    auth = base_keda("TriggerAuthentication")
    auth["spec"]["env"] = [{"parameter": "token", "name": "TOKEN", "containerName": "worker"}]
    auth["spec"]["podIdentity"] = {"provider": "gcp"}
    assert keda_errors(auth) == []
def test_every_configmap_variable_is_read_by_the_settings():
    config = yaml.safe_load((KUBERNETES / "base" / "configmap.yaml").read_text())["data"]
    settings_text = (ROOT / "webapp" / "settings.py").read_text()
    assert [name for name in config if f'"{name}"' not in settings_text] == []


def redirect_exempt(path: str) -> bool:
    return any(re.search(pattern, path.lstrip("/")) for pattern in settings.SECURE_REDIRECT_EXEMPT)


def test_probes_and_keda_calls_stay_on_plain_http_and_send_an_allowed_host(rendered):
    """With TUNEBOARD_HTTPS on, anything calling a pod directly over HTTP must not be redirected."""
    _, objects = rendered
    web = container(by_kind(objects, "Deployment")["tuneboard-web"])
    allowed = by_kind(objects, "ConfigMap")["tuneboard-config"]["data"]["ALLOWED_HOSTS"].split(",")
    for probe in ("readinessProbe", "livenessProbe"):
        get = web[probe]["httpGet"]
        assert redirect_exempt(get["path"]), get["path"]
        assert get.get("scheme", "HTTP") == "HTTP"
        assert {"name": "Host", "value": "localhost"} in get["httpHeaders"] and "localhost" in allowed
    for so in by_kind(objects, "ScaledObject").values():
        url = urlsplit(so["spec"]["triggers"][0]["metadata"]["url"])
        assert url.scheme == "http" and redirect_exempt(url.path) and url.hostname in allowed
    assert redirect_exempt("/metrics")
    assert not redirect_exempt("/login/") and not redirect_exempt("/api/v1/studies/")


def test_the_serving_overlay_runs_tf_serving_on_the_volume_the_cpu_workers_write():
    from experiments.serving.layout import CONFIG

    objects = render("serving")
    deployments = by_kind(objects, "Deployment")
    claim = by_kind(objects, "PersistentVolumeClaim")["tuneboard-serving"]
    assert "ReadWriteMany" in claim["spec"]["accessModes"]
    config = by_kind(objects, "ConfigMap")["tuneboard-config"]["data"]
    settings_text = (ROOT / "webapp" / "settings.py").read_text()
    assert all(f'"{name}"' in settings_text for name in ("TUNEBOARD_SERVING_DIR", "TUNEBOARD_SERVING_BASE_PATH"))

    def mounts(deployment) -> dict:
        """mountPath -> (claim, read-only) of the serving volume."""
        pod = deployment["spec"]["template"]["spec"]
        claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]
                  if "persistentVolumeClaim" in v}
        return {m["mountPath"]: (claims[m["name"]], m.get("readOnly", False))
                for m in container(deployment).get("volumeMounts", []) if m["name"] in claims}

    worker = deployments["tuneboard-worker-cpu"]
    assert mounts(worker) == {config["TUNEBOARD_SERVING_DIR"]: ("tuneboard-serving", False)}
    assert worker["spec"]["template"]["spec"]["securityContext"]["fsGroup"] == 1000
    assert container(worker)["command"][:4] == ["celery", "-A", "webapp", "worker"]  # the base's, kept
    serving = deployments["tuneboard-tf-serving"]
    assert mounts(serving) == {config["TUNEBOARD_SERVING_BASE_PATH"]: ("tuneboard-serving", True)}
    tf = container(serving)
    assert tf["image"] == "tensorflow/serving:" + re.search(
        r'"tensorflow==([\d.]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    flags = dict(arg.removeprefix("--").partition("=")[::2] for arg in tf["args"])
    assert flags["model_config_file"] == f"{config['TUNEBOARD_SERVING_BASE_PATH']}/team-1/{CONFIG}"
    assert int(flags["model_config_file_poll_wait_seconds"]) > 0
    assert "allow_version_labels_for_unavailable_models" in flags
    service = by_kind(objects, "Service")["tuneboard-tf-serving"]
    assert {p["port"] for p in service["spec"]["ports"]} == {8500, 8501}
    assert service["spec"]["selector"] == serving["spec"]["selector"]["matchLabels"]

