"""make test's parallel phase: each pytest process gets its own Redis database and var folder,
a plain run keeps what it was given, and each phase takes its own tests."""

from pathlib import Path

import pytest

from tests.parallel import isolate, outside_phase, redis_url_for, select_phase


def test_each_process_counts_down_from_the_suites_redis_database():
    assert redis_url_for("redis://127.0.0.1:6379/15", 0) == "redis://127.0.0.1:6379/15"
    assert redis_url_for("redis://127.0.0.1:6379/15", 3) == "redis://127.0.0.1:6379/12"
    with pytest.raises(RuntimeError, match="below 0"):
        redis_url_for("redis://127.0.0.1:6379/2", 3)


def test_a_process_gets_its_own_broker_var_folder_and_one_thread(tmp_path):
    environ = {"CELERY_BROKER_URL": "redis://127.0.0.1:6379/15", "TUNEBOARD_VAR_DIR": str(tmp_path),
               "TUNEBOARD_SERVING_DIR": str(tmp_path / "serving"), "OMP_NUM_THREADS": "2"}
    isolate(environ, "gw2")
    assert environ["CELERY_BROKER_URL"] == "redis://127.0.0.1:6379/13"
    assert Path(environ["TUNEBOARD_VAR_DIR"]) == tmp_path / "gw2"
    assert Path(environ["TUNEBOARD_SERVING_DIR"]) == tmp_path / "serving" / "gw2"
    assert environ["OMP_NUM_THREADS"] == "2", "a limit set by hand stands"
    assert environ["TF_NUM_INTRAOP_THREADS"] == "1"
    isolated = dict(environ)
    isolate(environ, "gw2")  # a worker the test starts loads the settings again: nothing moves twice
    assert environ == isolated


def test_a_plain_run_keeps_what_it_was_given():
    environ = {"CELERY_BROKER_URL": "redis://127.0.0.1:6379/15"}
    isolate(environ, "")
    assert environ == {"CELERY_BROKER_URL": "redis://127.0.0.1:6379/15"}


class _Item:
    def __init__(self, name: str, *markers: str):
        self.name, self.markers = name, set(markers)

    def get_closest_marker(self, name):
        return name if name in self.markers else None


class _Config:
    def __init__(self, phase: str):
        self.phase, self.deselected = phase, []
        self.hook = self

    def getoption(self, name):
        return self.phase

    def pytest_deselected(self, items):
        self.deselected += items


def _phase(phase: str, items: list) -> tuple[list[str], list[str]]:
    config = _Config(phase)
    select_phase(config, items)
    return [item.name for item in items], [item.name for item in config.deselected]


def test_each_phase_takes_its_marked_tests_and_the_serial_one_starts_the_long_ones_first():
    items = [_Item("quick"), _Item("timed", "serial", "worker"), _Item("stops-postgres", "alone"),
             _Item("browser", "browser"), _Item("quick-2"), _Item("trains", "worker"), _Item("timed-2", "serial")]
    assert _phase("parallel", list(items)) == (["quick", "browser", "quick-2", "trains"],
                                               ["timed", "stops-postgres", "timed-2"])
    assert _phase("serial", list(items))[0] == ["timed", "timed-2"]
    serial = [_Item("timed", "serial"), _Item("timed-on-a-worker", "serial", "worker"),
              _Item("eta", "serial", "alone")]
    assert _phase("serial", list(serial))[0] == ["timed-on-a-worker", "timed"]
    assert _phase("alone", list(serial))[0] == ["eta"]  # @alone wins over its module's @serial
    assert _phase("alone", list(items))[0] == ["stops-postgres"]
    assert _phase("all", list(items))[0] == [item.name for item in items]  # a plain run: as collected


def test_the_serial_and_alone_phases_import_only_the_modules_that_name_their_tests(tmp_path):
    timed = tmp_path / "test_timed.py"
    timed.write_text("pytestmark = pytest.mark.serial\n\n@pytest.mark.alone\ndef test_eta(): ...\n")
    plain = tmp_path / "test_plain.py"
    plain.write_text("def test_quick(): ...\n")
    helper = tmp_path / "helpers.py"
    helper.write_text("")
    assert [outside_phase("serial", path) for path in (timed, plain, helper)] == [False, True, False]
    assert [outside_phase("alone", path) for path in (timed, plain)] == [False, True]
    assert not outside_phase("parallel", plain) and not outside_phase("all", plain)

