"""One export-serving task, on a worker of the cpu queue that mounts the serving folder: write
the TF Serving layout of a team's registry (experiments/serving/layout.py, through
services/serving_exports.py) as the registry stands once it holds the folder's lock. No TensorFlow:
the SavedModels are unzipped as the trained models' workers made them."""

import socket
import time

from django.conf import settings

from experiments.services.connections import connections_close_expired, with_db_retry
from experiments.services.serving_exports import (
    serving_export_claim,
    serving_export_complete,
    serving_export_fail,
    serving_export_heartbeat,
    serving_export_release,
    serving_export_write,
)
from experiments.serving.layout import LayoutSuperseded
from workers.host.heartbeat import Heartbeat
from workers.host.shutdown import stop_requested
from workers.host.versions import package_versions
from workers.jobs.failures import failure_reason


def export_serving(*, export_pk: int) -> str:
    connections_close_expired()
    row = with_db_retry(serving_export_claim, export_pk=export_pk, worker_host=socket.gethostname())
    if row is None:
        return "nothing to do"  # a duplicated delivery, or another worker has it
    attempt = row.attempts
    if stop_requested() and with_db_retry(serving_export_release, export_pk=export_pk, attempt=attempt):
        return "released"  # claimed as its worker began to stop: another worker runs it
    environment = {"host": socket.gethostname(), "versions": package_versions()}
    started = time.monotonic()
    heartbeat = Heartbeat(lambda: serving_export_heartbeat(export_pk=export_pk, attempt=attempt),
                          settings.TRIAL_HEARTBEAT_SECONDS, name=f"heartbeat-serving-export-{export_pk}")
    heartbeat.start()
    try:
        report = serving_export_write(export=row)
        if with_db_retry(serving_export_complete, export_pk=export_pk, attempt=attempt, report=report,
                         environment=environment, duration_seconds=time.monotonic() - started):
            return "completed"
        # Requeued after a stale heartbeat once the layout was in place: it is whole, and the next
        # attempt writes the registry as it stands then.
        return "superseded"
    except LayoutSuperseded:
        return "superseded"  # no longer this attempt's before anything moved: nothing written
    except Exception as exc:  # any crash becomes a readable FAILED export; the previous layout stays
        with_db_retry(serving_export_fail, export_pk=export_pk, attempt=attempt, environment=environment,
                      error=failure_reason(exc, job=f"serving export {export_pk}"))
    finally:
        heartbeat.stop()
    return "failed"
