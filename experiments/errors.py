"""One base class for every error whose message is meant for a person.

Views and tasks catch `TuneboardError` and show `str(exc)` as is; anything else is a bug and
is logged with its traceback."""


class TuneboardError(Exception):
    """str(exc) says what went wrong and what to do about it."""
