"""make test's parallel phase: each pytest process gets its own Redis database and var folder,
and a plain run (the serial phase) keeps what it was given."""

from pathlib import Path

import pytest

from tests.parallel import isolate, redis_url_for


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
