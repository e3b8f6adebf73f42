"""The two ways a training job ends without a result, raised wherever it is set up or runs
(device placement, model building, the training loop) and turned into a row's outcome by the
job that caught it."""

from experiments.errors import TuneboardError


class TrialFailed(TuneboardError):
    """The trial cannot produce a result; str(exc) is shown to the user."""


class TrialCancelled(Exception):
    """The job no longer owns its row (cancelled, requeued, or its worker is stopping)."""
