"""The two ways a training job ends without a result, raised from set-up or training and turned into a row's outcome
by the job that caught it; below host/ and jobs/, which both raise them."""

from experiments.errors import TuneboardError


class TrialFailed(TuneboardError):
    """The trial cannot produce a result; str(exc) is shown to the user."""


class TrialCancelled(Exception):
    """The job no longer owns its row (cancelled, requeued, or its worker is stopping)."""


class TrialPreempted(TrialCancelled):
    """Fair share asked the trial to stop at an epoch end for a waiting study: `resume` (a
    workers.training.fitting.Resume) is where its next attempt goes on."""

    def __init__(self, resume):
        super().__init__("preempted")
        self.resume = resume
