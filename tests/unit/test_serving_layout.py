"""The TF Serving layout writer on plain files: what a first export writes, that a second one
after a label move rewrites only models.config, that versions leaving the plan are removed, and
that an export failing midway leaves the previous layout and config as they were.
models.config is read back with TF Serving's own protobuf definitions."""

import hashlib
import os
import zipfile
from pathlib import Path

import pytest

from experiments.serving import layout
from experiments.serving.layout import LayoutError, PlannedModel, PlannedVersion, layout_write
from tests.fixtures.registry_rows import parsed_config


def savedmodel_zip(folder: Path, tag: str, *, name: str = "old-name", version: int = 7) -> Path:
    """A zip in the layout trained models' SavedModel downloads have (workers/export/saved_model.py), under
    the model's own name and version, which the export replaces by the registry's."""
    path = folder / f"{tag}.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name}/{version}/saved_model.pb", f"graph of {tag}")
        archive.writestr(f"{name}/{version}/variables/variables.index", f"index of {tag}")
        archive.writestr(f"{name}/{version}/variables/variables.data-00000-of-00001", f"weights of {tag}")
        archive.writestr(f"{name}/{version}/assets/", "")
    return path


def planned(zip_path: Path, version: int) -> PlannedVersion:
    data = zip_path.read_bytes()
    return PlannedVersion(version=version, sha256=hashlib.sha256(data).hexdigest(),
                          fetch=lambda target: Path(target).write_bytes(data))


def tree(folder: Path) -> dict:
    """Every file under `folder` with its inode, mtime and bytes (the lock file aside)."""
    return {str(p.relative_to(folder)): (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes())
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != layout.LOCK}


@pytest.fixture
def zips(tmp_path):
    source = tmp_path / "zips"
    source.mkdir()
    return {tag: savedmodel_zip(source, tag) for tag in ("a", "b", "c", "d")}


def test_it_writes_each_version_under_the_registry_name_and_a_config_tf_serving_parses(tmp_path, zips):
    out = tmp_path / "serving"
    plan = [PlannedModel("digits", (planned(zips["a"], 1), planned(zips["b"], 2)), {"production": 1, "staging": 2}),
            PlannedModel("wine", (planned(zips["c"], 1),), {"production": 1})]

    report = layout_write(plan=plan, folder=out, base_path="/models/team-1")

    assert sorted(report["written"]) == ["digits/1", "digits/2", "wine/1"]
    assert (out / "digits" / "2" / "saved_model.pb").read_text() == "graph of b"
    assert (out / "digits" / "1" / "variables" / "variables.index").read_text() == "index of a"
    assert (out / "wine" / "1" / "assets").is_dir()
    assert parsed_config(out) == {
        "digits": ("/models/team-1/digits", [1, 2], {"production": 1, "staging": 2}),
        "wine": ("/models/team-1/wine", [1], {"production": 1}),
    }
    assert not [p for p in out.rglob("*") if p.name.startswith(layout.TEMPORARY)]


def test_the_base_path_defaults_to_the_folders_absolute_path(tmp_path, zips):
    layout_write(plan=[PlannedModel("digits", (planned(zips["a"], 1),))], folder=tmp_path / "s")
    assert parsed_config(tmp_path / "s")["digits"][0] == str((tmp_path / "s" / "digits").absolute())


def test_a_second_export_after_a_label_move_rewrites_only_the_config(tmp_path, zips):
    out = tmp_path / "serving"
    versions = (planned(zips["a"], 1), planned(zips["b"], 2))
    layout_write(plan=[PlannedModel("digits", versions, {"production": 1})], folder=out)
    before = {path: info for path, info in tree(out).items() if path != "models.config"}
    config_inode = (out / "models.config").stat().st_ino

    report = layout_write(plan=[PlannedModel("digits", versions, {"production": 2})], folder=out)

    assert report["written"] == [] and report["removed"] == []
    assert report["kept"] == ["digits/1", "digits/2"] and report["config_changed"] is True
    assert {path: info for path, info in tree(out).items() if path != "models.config"} == before
    assert (out / "models.config").stat().st_ino != config_inode  # replaced, not edited in place
    assert parsed_config(out)["digits"][2] == {"production": 2}
    # Nothing changed at all: not even the config is touched.
    unchanged = tree(out)
    again = layout_write(plan=[PlannedModel("digits", versions, {"production": 2})], folder=out)
    assert again["config_changed"] is False
    assert tree(out) == unchanged


def test_versions_and_models_that_leave_the_plan_are_removed_and_other_files_are_left_alone(tmp_path, zips):
    out = tmp_path / "serving"
    layout_write(plan=[PlannedModel("digits", (planned(zips["a"], 1), planned(zips["b"], 2))),
                       PlannedModel("wine", (planned(zips["c"], 1),))], folder=out)
    (out / "README.txt").write_text("someone else's")

    report = layout_write(plan=[PlannedModel("digits", (planned(zips["b"], 2), planned(zips["d"], 3)))], folder=out)

    assert report["written"] == ["digits/3"] and report["kept"] == ["digits/2"]
    assert sorted(report["removed"]) == ["digits/1", "wine/1"]
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == ["README.txt", "digits",
                                                                                   "models.config"]
    assert sorted(p.name for p in (out / "digits").iterdir()) == ["2", "3"]
    assert list(parsed_config(out)) == ["digits"]


def test_a_version_with_other_bytes_is_replaced(tmp_path, zips):
    out = tmp_path / "serving"
    layout_write(plan=[PlannedModel("digits", (planned(zips["a"], 1),))], folder=out)
    report = layout_write(plan=[PlannedModel("digits", (planned(zips["b"], 1),))], folder=out)
    assert report["written"] == ["digits/1"]
    assert (out / "digits" / "1" / "saved_model.pb").read_text() == "graph of b"
    assert not [p for p in out.rglob("*") if p.name.startswith(layout.TEMPORARY)]


def test_versions_without_a_savedmodel_and_labels_on_them_are_left_out_with_a_reason(tmp_path, zips):
    out = tmp_path / "serving"
    pending = PlannedVersion(version=2, missing="Its SavedModel is still being converted.")
    report = layout_write(plan=[PlannedModel("digits", (planned(zips["a"], 1), pending), {"production": 2,
                                                                                           "staging": 1}),
                                PlannedModel("empty", (PlannedVersion(version=1),))], folder=out)

    assert parsed_config(out) == {"digits": (str(out / "digits"), [1], {"staging": 1})}
    assert {"version": "digits/2", "reason": "Its SavedModel is still being converted."} in report["skipped"]
    assert any(s.get("label") == "production" for s in report["skipped"])
    assert any(s.get("model") == "empty" for s in report["skipped"])
    assert not (out / "digits" / "2").exists()


def failing_fetch(target):
    raise OSError("disk full (injected)")


@pytest.mark.parametrize("where", ["unpacking", "config"])
def test_an_export_failing_midway_leaves_the_previous_layout_and_config_intact(tmp_path, zips, monkeypatch, where):
    out = tmp_path / "serving"
    layout_write(plan=[PlannedModel("digits", (planned(zips["a"], 1),), {"production": 1}),
                       PlannedModel("wine", (planned(zips["c"], 1),))], folder=out)
    before = tree(out)
    later = [planned(zips["b"], 2), planned(zips["d"], 3)]
    if where == "unpacking":
        later[1] = PlannedVersion(version=3, sha256="f" * 64, fetch=failing_fetch)
    else:
        def replace_fails(src, dst):
            raise OSError("disk full (injected)")
        monkeypatch.setattr(layout.os, "replace", replace_fails)

    with pytest.raises(OSError, match="injected"):
        layout_write(plan=[PlannedModel("digits", (planned(zips["a"], 1), *later), {"production": 3})],
                     folder=out)

    assert tree(out) == before  # same files, same inodes, same bytes: wine/1 not removed, no digits/2
    assert not [p for p in out.rglob("*") if p.name.startswith(layout.TEMPORARY)]


def test_what_a_killed_export_left_aside_is_cleared_by_the_next(tmp_path, zips):
    out = tmp_path / "serving"
    (out / "digits" / f"{layout.TEMPORARY}1-dead").mkdir(parents=True)
    (out / f"{layout.TEMPORARY}models.config-dead").write_text("half")
    layout_write(plan=[PlannedModel("digits", (planned(zips["a"], 1),))], folder=out)
    assert not [p for p in out.rglob("*") if p.name.startswith(layout.TEMPORARY)]


def test_a_zip_without_one_savedmodel_folder_or_with_unsafe_paths_is_refused(tmp_path):
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(bad, "w") as archive:
        archive.writestr("m/1/../../../escape.pb", "x")
        archive.writestr("m/1/saved_model.pb", "x")
    with pytest.raises(LayoutError, match="unsafe path"):
        layout_write(plan=[PlannedModel("digits", (planned(bad, 1),))], folder=tmp_path / "s")
    assert not (tmp_path / "escape.pb").exists() and not (tmp_path / "s" / "models.config").exists()
    with zipfile.ZipFile(bad, "w") as archive:
        archive.writestr("m/1/variables/variables.index", "x")
    with pytest.raises(LayoutError, match="no saved_model.pb"):
        layout_write(plan=[PlannedModel("digits", (planned(bad, 1),))], folder=tmp_path / "s")
    with pytest.raises(LayoutError, match="folder name"):
        layout_write(plan=[PlannedModel("../up", ())], folder=tmp_path / "s")


def test_strings_in_the_config_are_escaped_as_text_format_reads_them(tmp_path, zips):
    base = 'C:\\models "quoted" café'
    layout_write(plan=[PlannedModel("digits", (planned(zips["a"], 1),))], folder=tmp_path / "s", base_path=base)
    assert parsed_config(tmp_path / "s")["digits"][0] == base + "/digits"
    assert os.path.exists(tmp_path / "s" / "digits" / "1" / layout.MARKER)


def test_a_superseded_export_leaves_the_layout_as_it_was_and_a_plan_callable_is_read_under_the_lock(tmp_path,
                                                                                                 zips):
    out = tmp_path / "s"
    layout_write(plan=[PlannedModel("digits", (planned(zips["a"], 1),), {"production": 1})], folder=out)
    before = tree(out)
    answers = iter([True, False])  # current when it starts, superseded once its versions are staged
    with pytest.raises(layout.LayoutSuperseded):
        layout_write(plan=[PlannedModel("digits", (planned(zips["a"], 1), planned(zips["b"], 2)), {"production": 2})],
                     folder=out, still_current=lambda: next(answers))
    assert tree(out) == before
    with pytest.raises(layout.LayoutSuperseded):
        layout_write(plan=lambda: pytest.fail("a superseded export reads no plan"), folder=out,
                     still_current=lambda: False)

    def plan():
        assert (out / layout.LOCK).exists()
        return [PlannedModel("digits", (planned(zips["a"], 1), planned(zips["b"], 2)), {"production": 2})]

    assert layout_write(plan=plan, folder=out, still_current=lambda: True)["written"] == ["digits/2"]
    assert parsed_config(out)["digits"][2] == {"production": 2}
