"""One base class for every error whose message is meant for a person: views and tasks show a TuneboardError's text
as is, and log anything else as a bug."""


class TuneboardError(Exception):
    """str(exc) says what went wrong and what to do about it."""


class TunerUnavailable(TuneboardError):
    """The study's tuner cannot run on this worker (a library it needs is not installed): the
    claim path ends the study FAILED with this message instead of retrying for ever."""
