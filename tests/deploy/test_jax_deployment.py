"""JAX workers as deployed (issue 24): the install extras, the Dockerfile's worker-jax target, the
Compose gpu-jax and cpu-jax profiles and the gpu-jax Kubernetes overlay. Read as text and rendered
offline; nothing is built or started. The backend/queue rule checked is the one a worker applies at
start-up (workers/host/backends/selection.py)."""

import re
import shlex
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from experiments.tuning.compute_options import DEFAULT_BACKEND, TASK_QUEUES
from tests.deploy.test_kubernetes_manifests import by_kind, container, render, worker_queue
from workers.host.backends.selection import queue_errors, worker_backend

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
TENSORFLOW = {"tensorflow", "tensorboard", "tensorflow-cpu", "tf-keras", "tf-nightly"}
XLA_MEMORY = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}


# --- pyproject: a JAX worker installs without TensorFlow ---------------------------------------

def extra_requirements(extra: str) -> list[Requirement]:
    """The extra's requirements, with the project's references to its own extras expanded."""
    found = []
    for line in PYPROJECT["optional-dependencies"][extra]:
        req = Requirement(line)
        if canonicalize_name(req.name) == canonicalize_name(PYPROJECT["name"]):
            found += [r for e in sorted(req.extras) for r in extra_requirements(e)]
        else:
            found.append(req)
    return found


def names(requirements) -> set[str]:
    return {canonicalize_name(r.name) for r in requirements}


def installed_closure(requirements: list[Requirement]) -> set[str]:
    """Every distribution the requirements pull in, as far as this environment's metadata tells
    (a requirement not installed here, e.g. the CUDA plugin, counts itself only)."""
    seen, todo = set(), [(r, frozenset(r.extras)) for r in requirements]
    while todo:
        req, extras = todo.pop()
        name = canonicalize_name(req.name)
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        try:
            dependencies = metadata.requires(req.name) or []
        except metadata.PackageNotFoundError:
            continue
        for line in dependencies:
            dep = Requirement(line)
            if dep.marker is None or any(dep.marker.evaluate({"extra": e}) for e in ("", *extras)):
                todo.append((dep, frozenset(dep.extras)))
    return {name for name, _ in seen}


def test_tensorflow_is_an_extra_not_a_core_dependency():
    core = names(Requirement(r) for r in PYPROJECT["dependencies"])
    assert not core & TENSORFLOW
    assert {"keras", "keras-tuner"} <= core  # both backends need them; KerasTuner runs on JAX
    # LiteRT's interpreter scores TFLite files on TensorFlow workers (where its wheels exist).
    assert names(extra_requirements("tensorflow")) == {"tensorflow", "tensorboard", "ai-edge-litert"}


def test_the_jax_extras_pin_one_jax_version_and_carry_no_tensorflow():
    jax = {r.name: r for r in extra_requirements("jax")}
    assert set(jax) == {"jax", "jaxlib"}
    (cuda,) = extra_requirements("jax-cuda")
    assert cuda.name == "jax" and cuda.extras == {"cuda12"}
    assert str(jax["jax"].specifier) == str(jax["jaxlib"].specifier) == str(cuda.specifier)
    assert str(cuda.specifier).startswith("==")


@pytest.mark.parametrize("extra", ["jax", "jax-cuda"])
def test_a_jax_install_pulls_no_tensorflow_even_through_its_dependencies(extra):
    requirements = [Requirement(r) for r in PYPROJECT["dependencies"]] + extra_requirements(extra)
    closure = installed_closure(requirements)
    assert {"keras", "keras-tuner", "jax"} <= closure
    assert not closure & TENSORFLOW, sorted(closure & TENSORFLOW)


def test_the_test_extra_installs_both_backends_for_ci_and_make_run():
    # make test runs both backends and every tuner (PyTorch for Optuna's GP); make run starts a worker of each.
    assert "install -q -e \".[test]\"" in (ROOT / "Makefile").read_text()
    assert {"tensorflow", "tensorboard", "jax", "jaxlib", "torch"} <= names(extra_requirements("test"))


# --- Dockerfile -----------------------------------------------------------------------------------

def dockerfile_stages() -> dict[str, list[tuple[str, str]]]:
    """{stage name: [(INSTRUCTION, arguments)]}, continuation lines joined, comments dropped; the
    last stage (the default target) is also under "" ."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    stages, current = {}, None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, arguments = line.partition(" ")
        if instruction.upper() == "FROM":
            match = re.fullmatch(r"(\S+)(?:\s+AS\s+(\S+))?", arguments.strip(), re.IGNORECASE)
            current = stages.setdefault(match.group(2) or match.group(1), [])
            stages[""] = current
        current.append((instruction.upper(), arguments.strip()))
    return stages


def stage_instructions(stages, name: str) -> list[tuple[str, str]]:
    """A stage's instructions preceded by those of the stages it is built FROM."""
    own = stages[name]
    parent = own[0][1].split()[0]
    return (stage_instructions(stages, parent) if parent in stages and parent != name else []) + own


def arg_defaults(instructions) -> dict[str, str]:
    return dict(a.split("=", 1) for i, a in instructions if i == "ARG" and "=" in a)


def pip_installs(instructions) -> list[str]:
    """Every `pip install` of the stage with its ARG defaults substituted."""
    args = arg_defaults(instructions)
    commands = [re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), a)
                for i, a in instructions if i == "RUN"]
    return [part for c in commands for part in re.split(r"&&|;", c) if "pip install" in part]


def env_of(instructions) -> dict[str, str]:
    env = {}
    for instruction, arguments in instructions:
        if instruction == "ENV":
            env.update(pair.split("=", 1) for pair in shlex.split(arguments))
    return env


def installed_extras(installs) -> set[str]:
    return {e.strip() for i in installs for group in re.findall(r"\.\[([^\]]+)\]", i) for e in group.split(",")}


def test_the_jax_target_installs_jax_for_gpus_and_no_tensorflow():
    stages = dockerfile_stages()
    jax = stage_instructions(stages, "worker-jax")
    installs = pip_installs(jax)
    # jax-cuda by default (JAX_EXTRA=jax for CPU hosts); gp: PyTorch's CPU build for Optuna's GP tuner
    assert installed_extras(installs) == {"jax-cuda", "gp"}
    assert any("download.pytorch.org/whl/cpu" in i and "torch==" in i for i in installs), installs
    assert not any(re.search(r"tensorflow|tensorboard", i) for i in installs), installs
    for extra in installed_extras(installs):
        assert not names(extra_requirements(extra)) & TENSORFLOW


def test_the_jax_target_runs_a_jax_worker_of_the_gpu_jax_queue_without_preallocating():
    jax = stage_instructions(dockerfile_stages(), "worker-jax")
    env = env_of(jax)
    assert env["KERAS_BACKEND"] == "jax" and env["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    (cmd,) = [yaml.safe_load(a) for i, a in jax if i == "CMD"]
    assert cmd[:4] == ["celery", "-A", "webapp", "worker"] and cmd[cmd.index("-Q") + 1] == "gpu-jax"
    assert queue_errors(["gpu-jax"], worker_backend(env)) == []
    users = [a for i, a in jax if i == "USER"]
    assert users and users[-1] not in ("root", "0")


def test_the_default_target_stays_the_tensorflow_image():
    stages = dockerfile_stages()
    default = stage_instructions(stages, "")
    assert installed_extras(pip_installs(default)) == {"tensorflow", "gp"}
    (torch,) = extra_requirements("gp")  # the CPU build, from PyTorch's own index, before the extra
    assert f'--index-url https://download.pytorch.org/whl/cpu "torch{torch.specifier}"' in " ".join(
        pip_installs(default))
    assert "KERAS_BACKEND" not in env_of(default)  # TensorFlow, the default backend
    (tensorflow,) = [r for r in extra_requirements("tensorflow") if r.name == "tensorflow"]
    assert f'"tensorflow[and-cuda]{tensorflow.specifier}"' in " ".join(pip_installs(default))


# --- Compose --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def services() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]


def consumed_queues(command: str) -> list[str]:
    words = command.split()
    return words[words.index("-Q") + 1].split(",")


def test_the_gpu_jax_profile_runs_a_jax_gpu_worker_of_gpu_jax_only(services):
    worker = services["worker-gpu-jax"]
    assert worker["profiles"] == ["gpu-jax"]
    assert worker["build"] == {"context": ".", "target": "worker-jax"}
    # Its own tag: building it must not replace the web's TensorFlow image.
    assert worker["image"] != services["web"]["image"]
    env = worker["environment"]
    assert env["KERAS_BACKEND"] == "jax"
    assert {k: env[k] for k in XLA_MEMORY} == XLA_MEMORY
    assert consumed_queues(worker["command"]) == ["gpu-jax"]
    assert "--hostname gpu-jax@%h" in worker["command"]
    devices = worker["deploy"]["resources"]["reservations"]["devices"]
    assert {"driver": "nvidia", "count": "all", "capabilities": ["gpu"]} in devices


def test_the_cpu_jax_profile_builds_the_same_target_with_cpu_wheels(services):
    worker = services["worker-cpu-jax"]
    assert worker["profiles"] == ["cpu-jax"]
    assert worker["build"]["target"] == "worker-jax" and worker["build"]["args"] == {"JAX_EXTRA": "jax"}
    assert worker["image"] not in (services["web"]["image"], services["worker-gpu-jax"]["image"])
    assert worker["environment"]["KERAS_BACKEND"] == "jax"
    assert consumed_queues(worker["command"]) == ["cpu-jax"]
    assert "jax" in PYPROJECT["optional-dependencies"]


def test_jax_workers_share_the_app_configuration_besides_their_backend(services):
    app = services["web"]["environment"]
    for name in ("worker-gpu-jax", "worker-cpu-jax"):
        env = dict(services[name]["environment"])
        assert env.pop("KERAS_BACKEND") == "jax"
        env.pop("XLA_PYTHON_CLIENT_PREALLOCATE", None)
        assert env == app, name


def test_every_compose_worker_runs_the_backend_of_its_queues(services):
    for name, service in services.items():
        command = service.get("command")
        if not (isinstance(command, str) and command.startswith("celery -A webapp worker")):
            continue
        queues = consumed_queues(command)
        assert set(queues) <= set(TASK_QUEUES), name
        backend = worker_backend({"KERAS_BACKEND": service["environment"].get("KERAS_BACKEND", DEFAULT_BACKEND)})
        assert queue_errors(queues, backend) == [], name


# --- Kubernetes -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gpu_jax() -> list[dict]:
    return render("gpu-jax")


def test_the_gpu_jax_overlay_runs_jax_gpu_workers_of_gpu_jax(gpu_jax):
    deployments = by_kind(gpu_jax, "Deployment")
    worker = deployments["tuneboard-worker-gpu-jax"]
    assert worker_queue(worker) == "gpu-jax"
    main = container(worker)
    env = {e["name"]: e["value"] for e in main["env"]}
    assert env["KERAS_BACKEND"] == "jax"
    assert {k: env[k] for k in XLA_MEMORY} == XLA_MEMORY
    assert main["image"] == "tuneboard-jax:latest"
    assert main["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert worker["metadata"]["labels"]["app.kubernetes.io/part-of"] == "tuneboard"
    # The TensorFlow cpu worker stays: it makes the SavedModel/TFLite of models trained on JAX.
    assert {worker_queue(d) for n, d in deployments.items() if n.startswith("tuneboard-worker-")} == {"cpu", "gpu-jax"}


def test_the_gpu_jax_worker_scales_on_its_own_queue(gpu_jax):
    scaled = by_kind(gpu_jax, "ScaledObject")["tuneboard-worker-gpu-jax"]
    assert scaled["spec"]["scaleTargetRef"]["name"] == "tuneboard-worker-gpu-jax"
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["metadata"]["url"] == "http://tuneboard-web:8000/scaling/gpu-jax/"
    assert trigger["authenticationRef"]["name"] in by_kind(gpu_jax, "TriggerAuthentication")
    assert scaled["spec"]["minReplicaCount"] == 0
