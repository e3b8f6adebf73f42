"""The docker-compose deployment: services, shared configuration and the image they run.

Reads docker-compose.yml and the Dockerfile as text; starts no containers and needs no
database. yaml.safe_load resolves the YAML anchors and merge keys the compose file uses.
"""

import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from webapp import settings as settings_module

ROOT = Path(__file__).resolve().parents[2]
APP_SERVICES = ("web", "worker-cpu", "worker-gpu", "beat")
# The JAX workers run their own image (tests/deploy/test_jax_deployment.py); same queue rules.
WORKERS = {"worker-cpu": "cpu", "worker-gpu": "gpu", "worker-gpu-jax": "gpu-jax", "worker-cpu-jax": "cpu-jax"}
PROFILES = {"worker-gpu": ["gpu"], "worker-gpu-jax": ["gpu-jax"], "worker-cpu-jax": ["cpu-jax"],
            "tf-serving": ["serving"]}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


@pytest.fixture(scope="module")
def app_env(services) -> dict:
    return services["web"]["environment"]


def command_of(service: dict) -> str:
    command = service["command"]
    return command if isinstance(command, str) else " ".join(command)


def test_the_compose_file_uses_the_compose_spec_without_a_version_key(compose):
    assert "version" not in compose


def test_postgres_redis_web_workers_and_beat_are_all_services(services):
    assert {"postgres", "redis", *APP_SERVICES} <= set(services)


def test_only_the_optional_workers_are_behind_profiles_named_for_their_queue(services):
    for name, profiles in PROFILES.items():
        assert services[name]["profiles"] == profiles
    for name in set(services) - set(PROFILES):
        assert "profiles" not in services[name], name


def test_the_gpu_worker_reserves_all_nvidia_gpus(services):
    devices = services["worker-gpu"]["deploy"]["resources"]["reservations"]["devices"]
    assert {"driver": "nvidia", "count": "all", "capabilities": ["gpu"]} in devices


@pytest.mark.parametrize("name", APP_SERVICES)
def test_every_app_service_shares_the_web_configuration(services, app_env, name):
    assert services[name]["environment"] == app_env


@pytest.mark.parametrize("name", APP_SERVICES)
def test_every_app_service_runs_the_one_tuneboard_image(services, name):
    assert services[name]["image"] == "tuneboard:latest"


def test_only_the_web_service_builds_the_image(services):
    assert services["web"]["build"] == "."
    assert [name for name in APP_SERVICES if "build" in services[name]] == ["web"]


def test_the_database_url_points_at_the_postgres_service(app_env):
    url = urlsplit(app_env["DATABASE_URL"])
    assert url.scheme in ("postgres", "postgresql")
    assert url.hostname == "postgres"


def test_the_database_url_parses_as_postgresql_with_the_settings_logic(app_env):
    config = settings_module._database(app_env["DATABASE_URL"])
    assert config["ENGINE"].endswith("postgresql")
    assert config["HOST"] == "postgres"


def test_the_database_url_credentials_match_the_postgres_service(services, app_env):
    url = urlsplit(app_env["DATABASE_URL"])
    postgres = services["postgres"]["environment"]
    assert url.username == postgres["POSTGRES_USER"]
    assert url.password == postgres["POSTGRES_PASSWORD"]
    assert url.path.lstrip("/") == postgres["POSTGRES_DB"]


def test_the_broker_url_points_at_the_redis_service(app_env):
    url = urlsplit(app_env["CELERY_BROKER_URL"])
    assert url.scheme == "redis"
    assert url.hostname == "redis"


def test_the_secret_key_must_be_set_in_the_environment(app_env):
    # ${VAR:?message}: Compose refuses to start without it, saying the message.
    match = re.fullmatch(r"\$\{SECRET_KEY:\?([^}]+)\}", app_env["SECRET_KEY"])
    assert match and ".env" in match.group(1)
    assert str(app_env["DEBUG"]).lower() == "false"  # so the settings require it too


def test_https_and_trusted_proxies_are_off_unless_set_in_dot_env(app_env):
    # ${VAR:-default}: taken from .env (or the shell) when set there.
    assert app_env["TUNEBOARD_HTTPS"] == "${TUNEBOARD_HTTPS:-false}"
    assert app_env["TUNEBOARD_TRUSTED_PROXIES"] == "${TUNEBOARD_TRUSTED_PROXIES:-0}"
    assert app_env["ALLOWED_HOSTS"].startswith("${ALLOWED_HOSTS:-")
    assert app_env["CSRF_TRUSTED_ORIGINS"].startswith("${CSRF_TRUSTED_ORIGINS:-")


def test_the_healthcheck_stays_on_plain_http_when_https_is_on(services):
    test = " ".join(services["web"]["healthcheck"]["test"])
    path = re.search(r"http://localhost:8000(/\w+)", test).group(1)
    assert any(re.search(p, path.lstrip("/")) for p in settings_module.SECURE_REDIRECT_EXEMPT)


def test_debug_is_off_and_artifacts_are_stored_in_the_database(app_env):
    assert str(app_env["DEBUG"]).lower() == "false"
    assert app_env["TUNEBOARD_ARTIFACT_STORAGE"] == "database"


def test_every_variable_set_for_the_app_is_read_by_the_settings(app_env):
    settings_text = (ROOT / "webapp" / "settings.py").read_text()
    unread = [name for name in app_env if f'"{name}"' not in settings_text]
    assert unread == [], f"docker-compose.yml sets variables settings.py never reads: {unread}"


def test_the_web_service_migrates_before_starting_gunicorn(services):
    command = command_of(services["web"])
    assert "manage.py migrate --noinput" in command
    assert "gunicorn webapp.wsgi:application" in command
    assert command.index("migrate") < command.index("gunicorn")
    assert re.search(r"migrate --noinput\s*&&\s*gunicorn", command)


def test_the_web_service_publishes_port_8000(services):
    assert "8000:8000" in services["web"]["ports"]


@pytest.mark.parametrize(("name", "queue"), WORKERS.items())
def test_each_worker_consumes_the_queue_it_is_named_for(services, name, queue):
    command = command_of(services[name])
    assert command.startswith("celery -A webapp worker ")
    assert re.search(rf"-Q {queue}(\s|$)", command)
    assert "--concurrency 1" in command
    assert f"--hostname {queue}@%h" in command


def test_beat_runs_the_celery_scheduler(services):
    assert command_of(services["beat"]).startswith("celery -A webapp beat")


@pytest.mark.parametrize("name", APP_SERVICES)
def test_every_app_service_waits_for_healthy_postgres_and_redis(services, name):
    depends_on = services[name]["depends_on"]
    assert depends_on["postgres"]["condition"] == "service_healthy"
    assert depends_on["redis"]["condition"] == "service_healthy"


@pytest.mark.parametrize("name", APP_SERVICES)
def test_every_app_service_restarts_unless_stopped(services, name):
    assert services[name]["restart"] == "unless-stopped"


def test_postgres_and_redis_have_healthchecks(services):
    assert "pg_isready" in " ".join(services["postgres"]["healthcheck"]["test"])
    assert "redis-cli" in services["redis"]["healthcheck"]["test"]


def test_postgres_keeps_its_data_on_a_named_volume_declared_at_top_level(compose, services):
    volumes = services["postgres"]["volumes"]
    assert "pgdata:/var/lib/postgresql/data" in volumes
    assert "pgdata" in compose["volumes"]


def test_the_dockerfile_installs_the_package_and_exposes_port_8000():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim\b", dockerfile, re.MULTILINE)
    # The default image's dependencies with TensorFlow (an extra), then the package itself.
    assert re.search(r'pip install --no-cache-dir "\.\[tensorflow,gp\]"', dockerfile)
    assert re.search(r"pip install --no-cache-dir --no-deps \.(\s|$)", dockerfile)
    assert re.search(r"^EXPOSE 8000$", dockerfile, re.MULTILINE)


def test_the_dockerfile_collects_static_files_and_runs_as_a_non_root_user():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^RUN SECRET_KEY=\S+ python manage.py collectstatic --noinput$", dockerfile, re.MULTILINE)
    assert "TUNEBOARD_VAR_DIR=/app/var" in dockerfile
    users = re.findall(r"^USER (\S+)$", dockerfile, re.MULTILINE)
    assert users and users[-1] not in ("root", "0")


@pytest.mark.parametrize(
    "source", ["manage.py", "webapp", "experiments", "workers", "templates", "static"]
)
def test_the_dockerfile_copies_the_application_source(source):
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(rf"^COPY {re.escape(source)}/? ", dockerfile, re.MULTILINE)


def test_the_build_context_leaves_out_the_virtualenv_and_local_data():
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".venv", "var", ".git"} <= set(ignored)


def test_workers_get_time_to_stop_their_trial_at_an_epoch_end(services):
    # Compose's default grace is 10 s before SIGKILL; a worker stopping gracefully needs one epoch.
    for name in WORKERS:
        grace = services[name].get("stop_grace_period", "10s")
        assert grace.endswith("m") and int(grace[:-1]) >= 5, f"{name}: stop_grace_period {grace}"


def test_the_image_carries_no_secret_key():
    # The build-time key belongs to the collectstatic command only: an ENV or ARG would be
    # baked into the image, and every container would then start with a public key.
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert not re.search(r"^(ENV|ARG)\b[^\n]*SECRET_KEY", dockerfile, re.MULTILINE)
    assert dockerfile.count("SECRET_KEY=") == 1


def tf_serving_flags(service: dict) -> dict:
    return dict(arg.removeprefix("--").partition("=")[::2] for arg in service["command"])


def test_tf_serving_reads_the_team_folder_the_cpu_worker_writes(compose, services, app_env):
    from experiments.serving.layout import CONFIG

    tf_serving, worker = services["tf-serving"], services["worker-cpu"]
    assert "serving" in compose["volumes"]
    written = next(v for v in worker["volumes"] if v.startswith("serving:")).split(":")[1]
    read = next(v for v in tf_serving["volumes"] if v.startswith("serving:"))
    assert written == app_env["TUNEBOARD_SERVING_DIR"]
    assert read == f"serving:{app_env['TUNEBOARD_SERVING_BASE_PATH']}:ro"
    flags = tf_serving_flags(tf_serving)
    # The folder serving_team_folder names (team-<id>) under where TF Serving sees the volume.
    assert re.fullmatch(rf"{app_env['TUNEBOARD_SERVING_BASE_PATH']}/\$\{{TUNEBOARD_SERVING_TEAM_FOLDER:-team-1\}}/"
                        rf"{CONFIG}", flags["model_config_file"])
    assert int(flags["model_config_file_poll_wait_seconds"]) > 0  # exports are picked up without a restart
    assert "allow_version_labels_for_unavailable_models" in flags
    # No authentication in TF Serving: published on the loopback only, as the README's curl calls reach it.
    assert set(tf_serving["ports"]) == {"127.0.0.1:8501:8501", "127.0.0.1:8500:8500"}


def test_tf_serving_is_the_release_of_the_tensorflow_that_writes_the_savedmodels(services):
    tag = services["tf-serving"]["image"].removeprefix("tensorflow/serving:")
    pinned = re.search(r'"tensorflow==([\d.]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    assert tag == pinned


def test_the_image_has_the_serving_folder_so_the_volume_starts_writable_by_the_app_user():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "mkdir -p /app/var/serving" in dockerfile and "chown -R tuneboard:tuneboard /app/var" in dockerfile

