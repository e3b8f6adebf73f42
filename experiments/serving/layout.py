"""TF Serving's folder layout for a team's registry, written from a plan incrementally and atomically, so a
running TF Serving never sees half a version or half a config."""

import fcntl
import json
import os
import secrets
import shutil
import time
import zipfile
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from experiments.errors import TuneboardError
from experiments.serving.model_config import ServedModel, models_config_text

CONFIG = "models.config"
MARKER = "tuneboard-export.json"
TEMPORARY = ".tuneboard-tmp-"
LOCK = ".tuneboard-export.lock"
SAVED_MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")


class LayoutError(TuneboardError):
    """A plan or a SavedModel zip the layout cannot be written from; str(exc) says why."""


class LayoutSuperseded(LayoutError):
    """The export may no longer write (cancelled, or queued again for another attempt): nothing
    of the layout was touched."""


@dataclass(frozen=True)
class PlannedVersion:
    """One version of a registered model in the plan: its SavedModel zip, known by its sha256 and fetched only when it
    must be unpacked."""

    version: int
    sha256: str = ""
    fetch: Callable[[Path], object] | None = None
    missing: str = ""


@dataclass(frozen=True)
class PlannedModel:
    name: str
    versions: tuple[PlannedVersion, ...]
    labels: dict[str, int] = field(default_factory=dict)  # alias -> version


def _check_name(name: str) -> None:
    if not name or name.startswith(".") or "/" in name or "\\" in name or name != name.strip():
        raise LayoutError(f"{name!r} cannot be a folder name in the serving layout.")


@contextmanager
def _locked(folder: Path):
    """One export of a folder at a time (a queued export can be claimed while one still runs,
    and the export_serving command may run beside a worker)."""
    with open(folder / LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _temporary(parent: Path, what: str) -> Path:
    return parent / f"{TEMPORARY}{what}-{secrets.token_hex(4)}"


def _clear_temporaries(folder: Path) -> None:
    """What an export killed midway left aside (never part of the layout TF Serving reads)."""
    for parent in [folder, *(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))]:
        for path in parent.glob(TEMPORARY + "*"):
            shutil.rmtree(path) if path.is_dir() else path.unlink()


def _marker_sha256(version_dir: Path) -> str | None:
    try:
        return json.loads((version_dir / MARKER).read_text())["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _unzip_version(archive: zipfile.ZipFile, into: Path) -> None:
    """The members under the zip's one `<name>/<version>/` folder, written below `into`."""
    paths = [PurePosixPath(member.filename).parts for member in archive.infolist()]
    prefixes = {parts[:2] for parts in paths if len(parts) > 2}
    if len(prefixes) != 1:
        raise LayoutError("The SavedModel zip does not hold exactly one <name>/<version>/ folder.")
    (prefix,) = prefixes
    for member in archive.infolist():
        parts = PurePosixPath(member.filename).parts
        if parts[:2] != prefix or len(parts) == 2:
            continue
        if any(part in ("..", "") for part in parts) or member.filename.startswith("/"):
            raise LayoutError(f"The SavedModel zip holds an unsafe path: {member.filename!r}.")
        target = into.joinpath(*parts[2:])
        if member.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        with archive.open(member) as source, open(target, "wb") as out:
            shutil.copyfileobj(source, out, 1024 * 1024)
    if not any((into / name).is_file() for name in SAVED_MODEL_FILES):
        raise LayoutError("The SavedModel zip holds no saved_model.pb.")


def _stage(folder: Path, name: str, version: PlannedVersion) -> Path:
    """The version unpacked into a temporary sibling of its final folder, marker included."""
    model_dir = folder / name
    model_dir.mkdir(exist_ok=True)
    staged = _temporary(model_dir, str(version.version))
    zip_path = _temporary(folder, f"{name}-{version.version}.zip")
    try:
        version.fetch(zip_path)
        try:
            with zipfile.ZipFile(zip_path) as archive:
                _unzip_version(archive, staged)
        except zipfile.BadZipFile as exc:
            raise LayoutError(f"The SavedModel file of {name}/{version.version} is not a zip ({exc}).") from exc
        (staged / MARKER).write_text(json.dumps({"sha256": version.sha256}))
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    finally:
        zip_path.unlink(missing_ok=True)
    return staged


def _write_config(folder: Path, text: str) -> bool:
    """models.config replaced in one step; False (nothing touched) when it already says `text`."""
    path = folder / CONFIG
    if path.is_file() and path.read_text() == text:
        return False
    aside = _temporary(folder, CONFIG)
    try:
        with open(aside, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(aside, path)
    finally:
        aside.unlink(missing_ok=True)
    return True


def _versions_on_disk(folder: Path):
    """(model name, version, folder) of every version folder an export wrote (it has a marker);
    anything else in the folder is someone else's and left alone."""
    for model_dir in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for version_dir in sorted(model_dir.iterdir()):
            if version_dir.name.isdigit() and (version_dir / MARKER).is_file():
                yield model_dir.name, int(version_dir.name), version_dir


def _remove(folder: Path, keep: set[tuple[str, int]]) -> list[str]:
    removed = []
    for name, version, version_dir in list(_versions_on_disk(folder)):
        if (name, version) in keep:
            continue
        # Renamed away first: a half-deleted folder never looks like a version to TF Serving.
        aside = _temporary(version_dir.parent, f"removed-{version}")
        os.rename(version_dir, aside)
        shutil.rmtree(aside)
        removed.append(f"{name}/{version}")
        if not any(version_dir.parent.iterdir()):
            version_dir.parent.rmdir()
    return removed


def _plan_model(folder: Path, model: PlannedModel, report: dict, staged: list) -> ServedModel | None:
    """What of `model` is served: kept versions, versions staged for writing, labels on them."""
    _check_name(model.name)
    served = []
    for version in sorted(model.versions, key=lambda v: v.version):
        where = f"{model.name}/{version.version}"
        if not version.sha256 or version.fetch is None:
            report["skipped"].append({"version": where, "reason": version.missing or "It has no SavedModel file."})
            continue
        target = folder / model.name / str(version.version)
        if _marker_sha256(target) == version.sha256:
            report["kept"].append(where)
        else:
            staged.append((_stage(folder, model.name, version), target, where))
        served.append(version.version)
    labels = {}
    for label, number in sorted(model.labels.items()):
        if number in served:
            labels[label] = number
        else:
            report["skipped"].append({"version": f"{model.name}/{number}", "label": label,
                                      "reason": f"The label {label!r} points at a version that is not served."})
    if not served:
        report["skipped"].append({"model": model.name, "reason": "No version of it has a SavedModel file."})
        return None
    report["labels"][model.name] = labels
    return ServedModel(name=model.name, base_path="", versions=tuple(served), labels=labels)


def _move_into_place(staged: list, report: dict, undo: list) -> None:
    for temporary, target, where in staged:
        if target.exists():  # the same version number with other bytes: the old one goes aside
            aside = _temporary(target.parent, f"replaced-{target.name}")
            os.rename(target, aside)
            undo.append((aside, target))
        os.rename(temporary, target)
        undo.append((target, None))
        report["written"].append(where)


def _undo(undo: list) -> None:
    for path, back_to in reversed(undo):
        if back_to is None:
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.rename(path, back_to)


def _check_current(still_current: Callable[[], bool] | None) -> None:
    if still_current is not None and not still_current():
        raise LayoutSuperseded("This export was superseded (cancelled or queued again); it wrote nothing.")


def layout_write(*, plan: list[PlannedModel] | Callable[[], list[PlannedModel]], folder: Path,
                 base_path: str | None = None, still_current: Callable[[], bool] | None = None) -> dict:
    """Write `plan`'s layout into `folder` under its lock and report what changed; a plan that is no longer current
    raises LayoutSuperseded before anything moves."""
    started = time.monotonic()
    folder = Path(folder).absolute()
    folder.mkdir(parents=True, exist_ok=True)
    base = (base_path or str(folder)).rstrip("/")
    report = {"folder": str(folder), "base_path": base or "/", "written": [], "kept": [], "removed": [],
              "skipped": [], "labels": {}}
    with _locked(folder):
        _check_current(still_current)
        plan = plan() if callable(plan) else plan
        _clear_temporaries(folder)
        staged: list = []
        undo: list = []
        try:
            served = [m for m in (_plan_model(folder, model, report, staged) for model in plan) if m is not None]
            _check_current(still_current)  # staging takes a while: asked again before anything moves
            _move_into_place(staged, report, undo)
            text = models_config_text([ServedModel(name=m.name, base_path=f"{base}/{m.name}", versions=m.versions,
                                                   labels=m.labels) for m in served])
            report["config_changed"] = _write_config(folder, text)
        except BaseException:
            _undo(undo)
            for temporary, _target, _where in staged:
                shutil.rmtree(temporary, ignore_errors=True)
            raise
        _clear_temporaries(folder)  # versions replaced by other bytes, now that the config is in place
        report["removed"] = _remove(folder, {(m.name, v) for m in served for v in m.versions})
    report["seconds"] = round(time.monotonic() - started, 3)
    return report
