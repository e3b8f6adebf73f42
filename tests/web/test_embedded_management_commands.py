"""In the checkout `make run` serves, every `manage.py` command runs without the user setting
SECRET_KEY: with the embedded defaults (no DATABASE_URL, no CELERY_BROKER_URL) the settings sign
with the key made once in var/secret_key, the one scripts/embedded_secret_key.sh gives the web
server and the worker. Each command runs in a fresh interpreter, in an environment like make run's."""

import os
import stat
import subprocess
import sys

import pytest

from tests.web.fresh_process import DEPLOYMENT_PREFIXES, ROOT, run_in_fresh_process


def make_run_env(var_dir, **variables) -> dict[str, str]:
    # What a shell in the checkout has: none of the suite's deployment variables (its key, its
    # PostgreSQL, its Redis), nor the browser tests' DJANGO_ALLOW_ASYNC_UNSAFE.
    env = {k: v for k, v in os.environ.items() if not k.startswith(DEPLOYMENT_PREFIXES) and
           k not in ("DJANGO_SETTINGS_MODULE", "DJANGO_ALLOW_ASYNC_UNSAFE")}
    env.update(TUNEBOARD_VAR_DIR=str(var_dir), PYTHONPATH=str(ROOT), **variables)
    return env


def manage(var_dir, *args, **variables) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=make_run_env(var_dir, **variables),
                          capture_output=True, text=True, timeout=300)


def test_management_commands_run_without_a_secret_key_in_the_make_run_checkout(tmp_path):
    var = tmp_path / "var"
    for args in (["export_serving", "--help"], ["createsuperuser", "--help"], ["migrate", "--noinput"],
                 ["migrate", "--check"], ["check"]):
        done = manage(var, *args)
        assert done.returncode == 0, (args, done.stderr[-3000:])
        assert "SECRET_KEY" not in done.stderr, args
    key_file = var / "secret_key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = key_file.read_text().strip()
    # What check --deploy asks of a key (security.W009).
    assert len(key) >= 50 and len(set(key)) >= 5 and not key.startswith("django-insecure-")


def test_the_settings_sign_with_the_key_make_run_gave_its_web_server_and_worker(tmp_path):
    var = tmp_path / "var"
    made = subprocess.run(["bash", "scripts/embedded_secret_key.sh"], cwd=ROOT, capture_output=True, text=True,
                          env=make_run_env(var, PYTHON=sys.executable), timeout=60, check=True).stdout.strip()
    script = 'import json; from django.conf import settings; print("RESULT:" + json.dumps(settings.SECRET_KEY))'
    read = [run_in_fresh_process(script, {"TUNEBOARD_VAR_DIR": str(var), "SECRET_KEY": None}, timeout=120)
            for _ in range(2)]
    assert read == [made, made]


def test_a_secret_key_that_is_set_wins_over_the_embedded_one(tmp_path):
    key = "set-by-the-user-" + "Qw3Er5Ty7Ui9Op1As2Df4Gh6" * 2
    script = 'import json; from django.conf import settings; print("RESULT:" + json.dumps(settings.SECRET_KEY))'
    assert run_in_fresh_process(script, {"TUNEBOARD_VAR_DIR": str(tmp_path), "SECRET_KEY": key}, timeout=120) == key
    assert not (tmp_path / "secret_key").exists()


@pytest.mark.parametrize("deployment", [{"DATABASE_URL": "postgres://tb:pw@db.example.internal:5432/tb"},
                                        {"CELERY_BROKER_URL": "redis://redis.example.internal:6379/0"}])
def test_a_deployment_still_refuses_to_run_a_command_without_a_secret_key(tmp_path, deployment):
    done = manage(tmp_path / "var", "export_serving", "--help", **deployment)
    assert done.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY is not set and DEBUG is off." in done.stderr
    assert not (tmp_path / "var" / "secret_key").exists()
