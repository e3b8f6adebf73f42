"""One base class for every error whose message is meant for a person.

Views and tasks catch `TuneboardError` and show `str(exc)` as is; anything else is a bug and
is logged with its traceback."""


class TuneboardError(Exception):
    """str(exc) says what went wrong and what to do about it."""


class TunerUnavailable(TuneboardError):
    """The study's tuner cannot run on this worker (a library it needs is not installed): the
    claim path ends the study FAILED with this message instead of retrying for ever."""
