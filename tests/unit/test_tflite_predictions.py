"""A batch prediction by a TFLite variant (workers/jobs/predictions.py): a chunk at a time, the rows done written
after each; a write that fails (a database blip) is ridden out as the Keras path's progress thread does, and a
refused one (cancelled, or queued again) stops it."""

import numpy as np
import pytest

from workers.jobs import predictions


def _runner(x, *, batch_size):
    return x * 2


def test_a_blip_in_the_progress_write_is_ridden_out_and_a_refusal_stops(monkeypatch):
    monkeypatch.setattr(predictions, "STEP_ROWS", 2)
    monkeypatch.setattr(predictions, "STEPS_PER_CHUNK", 2)
    monkeypatch.setattr(predictions, "connection_close", lambda: None)
    x = np.arange(10, dtype="float32")[:, None]
    written = []

    def progress(done):
        written.append(done)
        if len(written) == 1:
            raise ConnectionError("the database restarted")
        return True

    np.testing.assert_array_equal(predictions.predict_tflite_rows(_runner, x, progress=progress), x * 2)
    assert written == [4, 8, 10]
    with pytest.raises(predictions.PredictionStopped, match="stopped after 4 rows"):
        predictions.predict_tflite_rows(_runner, x, progress=lambda done: False)
