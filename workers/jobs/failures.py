"""A job's crash turned into the reason a person reads on its row.
(Riding out database restarts is experiments.services.connections.with_db_retry.)"""

import logging

from experiments.errors import TuneboardError

log = logging.getLogger(__name__)


def failure_reason(exc: BaseException, *, job: str) -> str:
    """What a failed trial or model shows: our own errors' messages as they are, memory
    exhaustion with advice, anything else (a bug, a library's error) by type and message,
    logged with its traceback."""
    if isinstance(exc, TuneboardError):
        return str(exc)
    if isinstance(exc, MemoryError):
        return "It ran out of memory; try fewer units or a smaller batch size."
    log.error("%s crashed", job, exc_info=exc)
    return f"{type(exc).__name__}: {exc}"
