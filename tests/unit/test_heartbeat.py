"""The one heartbeat thread (workers/host/heartbeat.py), which every job and the worker's own
heartbeat use: a failed beat is logged and the next one still comes; stop() ends it."""

import logging
import threading

from workers.host.heartbeat import Heartbeat


def test_a_failed_beat_does_not_stop_the_heartbeat(caplog):
    beats, third = [], threading.Event()

    def beat():
        beats.append(len(beats))
        if len(beats) == 1:
            raise ConnectionError("the database restarted")
        if len(beats) == 3:
            third.set()

    heartbeat = Heartbeat(beat, 0.01, name="heartbeat-test")
    with caplog.at_level(logging.WARNING, logger="workers.host.heartbeat"):
        heartbeat.start()
        assert third.wait(5)
        heartbeat.stop()
    assert not heartbeat.is_alive()
    assert "heartbeat heartbeat-test failed" in caplog.text


def test_it_beats_no_more_once_stopped():
    beats = []
    heartbeat = Heartbeat(lambda: beats.append(1), 0.01, name="heartbeat-test")
    heartbeat.start()
    heartbeat.stop()
    counted = len(beats)
    heartbeat.stopped.wait(0.05)
    assert not heartbeat.is_alive() and len(beats) == counted
