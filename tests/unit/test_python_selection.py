"""Which Python the Makefile builds .venv with (scripts/find_python.sh), and that the supported
range is the same in the script, both pyproject files and the Dockerfile.

The interpreters are tiny shell scripts that print a version, on a PATH holding nothing else
but the few tools the scripts call, so the machine's own Pythons never answer. No database.
"""

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "find_python.sh"
BASH = shutil.which("bash")
# What the script and the Makefile's recipe run besides shell builtins and the interpreters.
TOOLS = ("bash", "sh", "head", "cat", "make", "rm", "mkdir", "cp", "chmod", "touch")
# An interpreter as `python -c ...` sees it; `-m venv DIR` copies itself into DIR/bin/python
# next to a pip that only records its arguments, which is all the Makefile asks of a venv.
FAKE_PYTHON = """#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  mkdir -p "$3/bin" && cp "$0" "$3/bin/python"
  printf '#!/bin/sh\\necho "$*" >> "%s/pip.log"\\n' "$3" > "$3/bin/pip" && chmod +x "$3/bin/pip"
  exit 0
fi
echo {version}
"""
# What a pyenv shim does for a version that is installed but not selected.
PYENV_SHIM = """#!/bin/sh
echo "pyenv: $0: command not found" >&2
exit 127
"""


def supported_versions() -> list[str]:
    return re.search(r'^SUPPORTED="([^"]+)"', SCRIPT.read_text(), re.MULTILINE).group(1).split()


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.fixture
def bin_dir(tmp_path) -> Path:
    """An empty folder for fake interpreters, first on PATH."""
    return tmp_path / "bin"


@pytest.fixture
def env(tmp_path, bin_dir) -> dict:
    tools = tmp_path / "tools"
    tools.mkdir()
    for name in TOOLS:
        (tools / name).symlink_to(shutil.which(name))
    bin_dir.mkdir()
    return {"PATH": f"{bin_dir}:{tools}", "HOME": str(tmp_path)}


def fake(bin_dir: Path, name: str, version: str) -> Path:
    return executable(bin_dir / name, FAKE_PYTHON.format(version=version))


def find_python(env: dict, python: str | None = None) -> subprocess.CompletedProcess:
    env = env | ({"PYTHON": python} if python is not None else {})
    return subprocess.run([BASH, SCRIPT], env=env, capture_output=True, text=True, timeout=30)


def test_the_first_supported_interpreter_on_path_is_picked(env, bin_dir):
    fake(bin_dir, "python3.12", "3.12")
    fake(bin_dir, "python3.13", "3.13")
    result = find_python(env)
    assert (result.returncode, result.stdout.strip()) == (0, str(bin_dir / "python3.12"))


def test_python3_is_picked_when_its_version_is_supported(env, bin_dir):
    fake(bin_dir, "python3", "3.13")
    result = find_python(env)
    assert (result.returncode, result.stdout.strip()) == (0, str(bin_dir / "python3"))


def test_a_name_that_lies_about_its_version_or_does_not_run_is_passed_over(env, bin_dir):
    fake(bin_dir, "python3.11", "3.10")
    executable(bin_dir / "python3.12", PYENV_SHIM)
    fake(bin_dir, "python3", "3.9")
    fake(bin_dir, "python3.13", "3.13")
    result = find_python(env)
    assert (result.returncode, result.stdout.strip()) == (0, str(bin_dir / "python3.13"))


def test_a_supported_python_in_PYTHON_wins_over_path(env, bin_dir, tmp_path):
    fake(bin_dir, "python3.11", "3.11")
    chosen = fake(tmp_path / "elsewhere", "python", "3.13")
    result = find_python(env, str(chosen))
    assert (result.returncode, result.stdout.strip()) == (0, str(chosen))


@pytest.mark.parametrize("version", ["3.10", "3.14", "2.7"])
def test_an_unsupported_python_in_PYTHON_is_refused_even_with_a_good_one_on_path(env, bin_dir, tmp_path, version):
    fake(bin_dir, "python3.11", "3.11")
    chosen = fake(tmp_path / "elsewhere", "python", version)
    result = find_python(env, str(chosen))
    assert result.returncode == 1
    assert result.stdout == ""
    assert f"PYTHON={chosen} is Python {version}. Tuneboard needs Python 3.11, 3.12 or 3.13" in result.stderr


def test_a_PYTHON_that_does_not_run_is_refused(env, bin_dir):
    fake(bin_dir, "python3.11", "3.11")
    result = find_python(env, "python3.12")
    assert result.returncode == 1
    assert "PYTHON=python3.12 does not run as a Python interpreter" in result.stderr


def test_with_no_supported_interpreter_it_says_what_to_install_and_fails(env, bin_dir):
    fake(bin_dir, "python3", "3.10")
    executable(bin_dir / "python3.12", PYENV_SHIM)
    result = find_python(env)
    assert result.returncode == 1
    assert result.stdout == ""
    assert "Tuneboard needs Python 3.11, 3.12 or 3.13; none found on PATH" in result.stderr
    assert "apt-get install python3.11 or pyenv install 3.12" in result.stderr
    assert "make PYTHON=/path/to/python3.12 test" in result.stderr


# The Makefile's .venv rule, run for real with fake interpreters in a copy of the repository's
# Makefile and script (pip is the fake one, so nothing is installed).


@pytest.fixture
def project(tmp_path) -> Path:
    folder = tmp_path / "project"
    (folder / "scripts").mkdir(parents=True)
    (folder / "client").mkdir()
    shutil.copy(ROOT / "Makefile", folder)
    shutil.copy(SCRIPT, folder / "scripts")
    (folder / "pyproject.toml").touch()
    (folder / "client" / "pyproject.toml").touch()
    return folder


def make_venv(project: Path, env: dict, **variables) -> subprocess.CompletedProcess:
    arguments = [f"{name}={value}" for name, value in variables.items()]
    return subprocess.run(["make", ".venv/.installed", *arguments], cwd=project, env=env,
                          capture_output=True, text=True, timeout=60)


def venv_version(project: Path) -> str:
    return subprocess.run([project / ".venv/bin/python", "-c", ""], capture_output=True, text=True).stdout.strip()


def test_make_builds_the_venv_with_the_picked_interpreter_and_installs_into_it(project, env, bin_dir):
    fake(bin_dir, "python3.12", "3.12")
    result = make_venv(project, env)
    assert result.returncode == 0, result.stderr
    assert f"creating .venv with {bin_dir / 'python3.12'}" in result.stdout
    assert venv_version(project) == "3.12"
    assert "install -q -e .[test] -e ./client" in (project / ".venv/pip.log").read_text()
    assert (project / ".venv/.installed").exists()


def test_make_stops_with_the_install_message_and_creates_nothing_without_a_supported_python(project, env, bin_dir):
    fake(bin_dir, "python3", "3.10")
    result = make_venv(project, env)
    assert result.returncode != 0
    assert "none found on PATH" in result.stderr
    assert not (project / ".venv").exists()


def test_make_remakes_an_up_to_date_venv_made_by_an_unsupported_python(project, env, bin_dir):
    fake(bin_dir, "python3.10", "3.10")
    fake(bin_dir, "python3.13", "3.13")
    assert make_venv(project, env, PYTHON=bin_dir / "python3.13").returncode == 0
    fake(project / ".venv/bin", "python", "3.10")  # as if it had been made by python3.10
    result = make_venv(project, env)
    assert result.returncode == 0, result.stderr
    assert ".venv was made by Python 3.10, which is not supported" in result.stderr
    assert f"removing .venv to make it again with {bin_dir / 'python3.13'}" in result.stdout
    assert venv_version(project) == "3.13"


def test_make_leaves_a_supported_venv_alone_and_remakes_it_for_another_PYTHON(project, env, bin_dir):
    fake(bin_dir, "python3.11", "3.11")
    fake(bin_dir, "python3.13", "3.13")
    assert make_venv(project, env).returncode == 0
    assert venv_version(project) == "3.11"
    again = make_venv(project, env)
    assert (again.returncode, "creating" in again.stdout, "removing" in again.stdout) == (0, False, False)
    switched = make_venv(project, env, PYTHON=bin_dir / "python3.13")
    assert switched.returncode == 0, switched.stderr
    assert venv_version(project) == "3.13"


def test_make_refuses_an_unsupported_PYTHON_and_keeps_the_venv(project, env, bin_dir):
    fake(bin_dir, "python3.12", "3.12")
    old = fake(bin_dir, "python3.10", "3.10")
    assert make_venv(project, env).returncode == 0
    result = make_venv(project, env, PYTHON=old)
    assert result.returncode != 0
    assert f"PYTHON={old} is Python 3.10. Tuneboard needs Python 3.11, 3.12 or 3.13" in result.stderr
    assert venv_version(project) == "3.12"


# One supported range everywhere.


def minors_admitted(requires_python: str) -> list[str]:
    spec = SpecifierSet(requires_python)
    return [f"3.{minor}" for minor in range(6, 20) if f"3.{minor}.0" in spec]


@pytest.mark.parametrize("pyproject", ["pyproject.toml", "client/pyproject.toml"])
def test_requires_python_admits_exactly_the_supported_versions(pyproject):
    project = tomllib.loads((ROOT / pyproject).read_text())
    assert minors_admitted(project["project"]["requires-python"]) == supported_versions()
    # Ruff must not rewrite code with syntax the oldest supported Python lacks.
    oldest = supported_versions()[0]
    assert project["tool"]["ruff"]["target-version"] == "py" + oldest.replace(".", "")


def test_the_docker_image_runs_a_supported_python():
    base = re.search(r"^FROM python:(\d+\.\d+)-slim\b", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    assert base is not None
    assert base.group(1) in supported_versions()


def test_the_script_lists_every_supported_version_as_a_candidate_and_in_its_message():
    text = SCRIPT.read_text()
    versions = supported_versions()
    assert versions == ["3.11", "3.12", "3.13"]
    candidates = re.search(r'^CANDIDATES="([^"]+)"', text, re.MULTILINE).group(1).split()
    assert candidates == [f"python{version}" for version in versions] + ["python3"]
    assert "Tuneboard needs Python 3.11, 3.12 or 3.13" in text
