"""Serving exports: jobs writing the TF Serving layout of a team's registered models
(experiments/serving/layout.py) into the team's serving folder, on a worker of the cpu queue
(the folder is a volume that worker and TF Serving share), on demand and after every alias move.

An export is a job (services/jobs.py, as conversions are): a request saves a QUEUED row and
sends its task once the transaction commits; a worker claims it as a new attempt, and once it
holds the folder's lock checks that the attempt is still the running one and reads the plan from
the registry *then* (so the export writes the alias state of the moment it writes, never an older
one over a newer), writes the layout and completes with its report, every write fenced by the
attempt; the reaper queues a
lost one again and re-sends one whose task never arrived. At most one export per team waits in
the queue: a request while one is queued returns it (it will read the latest aliases when it
runs); while one runs, a request queues a new one, so a move made during a running export is
exported too."""

import socket
import time
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from experiments.models import ServingExport, Team
from experiments.selectors.artifacts import artifact_copy_to_path
from experiments.selectors.serving_exports import serving_base_path, serving_folder, serving_plan
from experiments.services.jobs import (
    job_claim,
    job_fail,
    job_heartbeat,
    job_move,
    job_release,
    job_sent,
    job_unsent,
    jobs_reap,
)
from experiments.services.queueing import serving_export_task_enqueue
from experiments.serving.layout import PlannedModel, PlannedVersion, layout_write
from experiments.states import JobStatus
from experiments.tuning.compute_options import DEFAULT_BACKEND, task_queue

# Unzipping SavedModels needs no TensorFlow and no accelerator: the cpu queue, whose workers
# mount the serving volume (docker-compose.yml, deploy/kubernetes/overlays/serving).
SERVING_EXPORT_QUEUE = task_queue("cpu", DEFAULT_BACKEND)
REASON_LENGTH = ServingExport._meta.get_field("reason").max_length


def serving_export_send(*, export: ServingExport) -> None:
    job_sent(table=ServingExport, pk=export.pk)
    serving_export_task_enqueue(export_pk=export.pk, queue=SERVING_EXPORT_QUEUE,
                                unsent=job_unsent(ServingExport, export.pk))


def _queued(*, team: Team, reason: str, user) -> tuple[ServingExport, bool]:
    """The team's queued export, or a new one (True); one request at a time per team."""
    Team.objects.select_for_update().only("pk").get(pk=team.pk)
    queued = ServingExport.objects.filter(team_id=team.pk, status=JobStatus.QUEUED).first()
    if queued is not None:
        return queued, False
    return ServingExport.objects.create(team_id=team.pk, reason=reason[:REASON_LENGTH], created_by=user), True


def serving_export_request(*, team: Team, reason: str, user=None) -> ServingExport:
    """Queue an export of the team's registry to its serving folder (sent after the current
    transaction commits). Called on demand and by every alias move."""
    with transaction.atomic():
        export, created = _queued(team=team, reason=reason, user=user)
        if created:
            serving_export_send(export=export)
    return export


def _with_plan(export: ServingExport) -> ServingExport:
    export.plan = serving_plan(team=export.team)
    export.folder = serving_folder(team=export.team)
    export.base_path = serving_base_path(team=export.team)
    return export


def serving_export_claim(*, export_pk: int, worker_host: str) -> ServingExport | None:
    """QUEUED -> RUNNING for exactly one worker; the row's `attempts` is the fence. It carries
    what the worker writes: `plan` (serving_plan as it stands now; serving_export_write reads it
    again once the folder is locked), `folder` and `base_path`."""
    if not job_claim(table=ServingExport, pk=export_pk, worker_host=worker_host):
        return None
    return _with_plan(ServingExport.objects.select_related("team").get(pk=export_pk))


def serving_export_heartbeat(*, export_pk: int, attempt: int) -> bool:
    return job_heartbeat(table=ServingExport, pk=export_pk, attempt=attempt)


def _planned(plan) -> list[PlannedModel]:
    return [PlannedModel(name=model.name, labels=model.labels, versions=tuple(
        PlannedVersion(version=v.version, missing=v.missing, sha256=v.artifact.sha256 if v.artifact else "",
                       fetch=(lambda path, a=v.artifact: artifact_copy_to_path(artifact=a, path=path))
                       if v.artifact else None)
        for v in model.versions)) for model in plan]


def serving_export_write(*, export: ServingExport, folder: Path | None = None, base_path: str | None = None) -> dict:
    """Write the claimed export's plan (into its team's folder, or `folder` as TF Serving sees it
    at `base_path`); the layout writer's report. Only versions that changed are fetched.

    Fenced by the export's attempt: once the folder is locked, an attempt that is no longer the
    running one (cancelled, or queued again by the reaper) writes nothing (LayoutSuperseded), and
    the plan is read from the registry again, so an export that waited for another's lock never
    writes older aliases over newer ones."""

    def still_current() -> bool:
        return ServingExport.objects.filter(pk=export.pk, status=JobStatus.RUNNING,
                                            attempts=export.attempts).exists()

    def plan() -> list[PlannedModel]:
        export.plan = serving_plan(team=export.team)
        return _planned(export.plan)

    if folder is None:
        folder, base_path = export.folder, base_path or export.base_path
    return layout_write(plan=plan, folder=folder, base_path=base_path, still_current=still_current)


def serving_export_complete(*, export_pk: int, attempt: int, report: dict, duration_seconds: float,
                            environment: dict | None = None) -> bool:
    return job_move(table=ServingExport, pk=export_pk, target=JobStatus.COMPLETED, attempt=attempt, report=report,
                    duration_seconds=duration_seconds, environment=environment or {}, finished=timezone.now())


def serving_export_fail(*, export_pk: int, attempt: int, error: str, environment: dict | None = None) -> bool:
    return job_fail(table=ServingExport, pk=export_pk, attempt=attempt, error=error, environment=environment or {})


def _send_by_pk(export_pk: int) -> None:
    serving_export_send(export=ServingExport.objects.get(pk=export_pk))


def serving_export_release(*, export_pk: int, attempt: int) -> bool:
    """Its worker is shutting down: queued again at once, not counted as lost (services/jobs.py)."""
    return job_release(table=ServingExport, pk=export_pk, attempt=attempt, send=_send_by_pk)


def serving_exports_reap(*, now=None) -> dict:
    """Lost exports queued again (failed after the last attempt), unsent ones sent again."""
    return jobs_reap(jobs=ServingExport.objects.all(), send=lambda export: serving_export_send(export=export), now=now)


def serving_export_here(*, team: Team, user=None, folder: Path | None = None,
                        base_path: str | None = None) -> ServingExport:
    """The export run in this process (the export_serving command): recorded as the team's
    export like a worker's, never sent to the broker. `folder` (as TF Serving sees it at
    `base_path`) instead of the team's serving folder. Raises what the writer raised, with the
    export FAILED."""
    with transaction.atomic():  # claimed before anyone sees it queued (the reaper would send it to a worker)
        export = ServingExport.objects.create(team_id=team.pk, reason="command", created_by=user)
        export = serving_export_claim(export_pk=export.pk, worker_host=f"{socket.gethostname()} (export_serving)")
    started = time.monotonic()
    try:
        report = serving_export_write(export=export, folder=folder, base_path=base_path)
    except Exception as exc:
        serving_export_fail(export_pk=export.pk, attempt=export.attempts, error=f"{type(exc).__name__}: {exc}")
        raise
    serving_export_complete(export_pk=export.pk, attempt=export.attempts, report=report,
                            duration_seconds=time.monotonic() - started)
    export.refresh_from_db()
    return export
