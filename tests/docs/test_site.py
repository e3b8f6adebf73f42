"""The documentation site (docs/, mkdocs.yml): it builds in strict mode, so a broken link, anchor or
picture fails the suite; every configuration variable the code reads is in the reference's table;
the README stays short and points into the site."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command

ROOT = Path(__file__).resolve().parents[2]
CONFIGURATION = ROOT / "docs" / "reference" / "configuration.md"
# A variable read through webapp/env.py's readers or os.environ, as settings.py reads them all.
READ = re.compile(r'(?:\benv_\w+|os\.environ\.get|os\.getenv)\(\s*"([A-Z][A-Z0-9_]*)"')
# Tuneboard's own variables, wherever the web or worker code reads them.
OWN = re.compile(r'"(TUNEBOARD_[A-Z0-9_]+)"')
# The first cell of a row of the reference's table names one variable or several (`A`, `B`).
FIRST_CELL = re.compile(r"^\| (`[^|]+) \|", re.M)


def variables_read(settings_source: str, code_sources=()) -> set[str]:
    names = set(READ.findall(settings_source))
    for source in code_sources:
        names |= set(OWN.findall(source))
    return names


def undocumented(names: set[str], reference: str) -> list[str]:
    documented = {name for cell in FIRST_CELL.findall(reference) for name in re.findall(r"`([A-Z][A-Z0-9_]*)`", cell)}
    return sorted(names - documented)


def _build(config: dict, folder: Path) -> subprocess.CompletedProcess:
    path = folder / "mkdocs.yml"
    path.write_text(yaml.safe_dump(config))
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(path)],
                          capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=300)


def _site_config(docs: Path, site: Path) -> dict:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    return {**config, "docs_dir": str(docs), "site_dir": str(site)}


@pytest.mark.django_db
def test_the_site_builds_in_strict_mode_with_the_api_schema_rendered(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs, ignore=shutil.ignore_patterns("openapi.yaml"))
    call_command("spectacular", file=str(docs / "reference" / "openapi.yaml"))  # as make docs does
    built = _build(_site_config(docs, tmp_path / "site"), tmp_path)
    assert built.returncode == 0, built.stdout + built.stderr
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text()
    assert "swagger-ui" in api and (tmp_path / "site" / "reference" / "openapi.yaml").exists()
    for picture in re.findall(r"\(images/([\w-]+\.png)\)", (ROOT / "docs" / "getting-started.md").read_text()):
        assert (tmp_path / "site" / "images" / picture).stat().st_size > 10_000, picture


def test_a_broken_link_or_anchor_fails_the_strict_build(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [the guide](guide.md#no-such-part).\n")
    (docs / "guide.md").write_text("# Guide\n\n## A part\n")
    config = {**_site_config(docs, tmp_path / "site"), "nav": ["index.md", "guide.md"],
              "plugins": ["search"]}
    built = _build(config, tmp_path)
    assert built.returncode != 0 and "does not contain an anchor '#no-such-part'" in built.stdout + built.stderr


def test_every_configuration_variable_the_code_reads_is_in_the_reference():
    code = [path.read_text() for folder in ("webapp", "experiments", "workers")
            for path in (ROOT / folder).rglob("*.py")]
    names = variables_read((ROOT / "webapp" / "settings.py").read_text(), code)
    assert {"DATABASE_URL", "SECRET_KEY", "TUNEBOARD_FAIR_SHARE", "TUNEBOARD_TF_THREADS"} <= names
    assert undocumented(names, CONFIGURATION.read_text()) == []


def test_an_undocumented_variable_is_named():
    names = variables_read('X = env_int("TUNEBOARD_NEW_KNOB", 3)\nY = os.environ.get("DEBUG")', [])
    assert undocumented(names, "| `DEBUG` | `false` | debug pages |\n") == ["TUNEBOARD_NEW_KNOB"]
    assert undocumented(names, "| `DEBUG`, `TUNEBOARD_NEW_KNOB` | | |\nTUNEBOARD_NEW_KNOB in prose\n") == []


def test_the_readme_is_short_and_its_links_reach_the_docs():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    assert "make run" in readme and "make test" in readme and "docs/images/" in readme
    for target in re.findall(r"\]\(((?:docs/|CONTRIBUTING)[^)#]*)", readme):
        assert (ROOT / target).exists(), target
