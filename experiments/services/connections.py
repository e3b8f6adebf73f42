"""A long-running worker's database connection: fresh for each job, riding out a PostgreSQL restart, handed back
before a fork, so worker code never reaches into the ORM."""

import logging
import time

from django.db import InterfaceError, OperationalError, close_old_connections, connection

log = logging.getLogger(__name__)
DB_RETRY_SECONDS = 300
# What a lost or refused connection raises: a step that failed with one may be run again.
DATABASE_UNAVAILABLE = (OperationalError, InterfaceError)


def with_db_retry(function, *args, **kwargs):
    """Run a database step, riding out a PostgreSQL restart: on a connection error, drop the
    connection and try again for up to DB_RETRY_SECONDS, so a finished trial is not lost."""
    deadline = time.monotonic() + DB_RETRY_SECONDS
    delay = 0.5
    while True:
        try:
            return function(*args, **kwargs)
        except DATABASE_UNAVAILABLE:
            if time.monotonic() > deadline:
                raise
            log.warning("database unavailable; retrying %s in %.1fs", function.__name__, delay)
            connection.close()
            time.sleep(delay)
            delay = min(delay * 2, 10)


def connection_close() -> None:
    """Hand this thread's connection back; the next query opens a new one (after an error, so a
    restarted PostgreSQL is reached again; before a fork, so no child shares the socket)."""
    connection.close()


def connections_close_expired() -> None:
    """Before a job: close connections that are broken or past CONN_MAX_AGE, as Django does
    around each request (a worker's jobs are its requests)."""
    close_old_connections()
