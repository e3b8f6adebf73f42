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
from experiments.selectors.serving_exports import serving_plan
from experiments.services.job_kinds import JOB_KINDS
from experiments.services.jobs import job_claim, job_fail, job_move, job_send
from experiments.serving.layout import PlannedModel, PlannedVersion, layout_write
from experiments.states import JobStatus

REASON_LENGTH = ServingExport._meta.get_field("reason").max_length


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
            job_send(kind=JOB_KINDS["serving_exports"], row=export)
    return export


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
    return job_move(kind=JOB_KINDS["serving_exports"], pk=export_pk, target=JobStatus.COMPLETED, attempt=attempt,
                    report=report, duration_seconds=duration_seconds, environment=environment or {},
                    finished=timezone.now())


def serving_export_here(*, team: Team, user=None, folder: Path | None = None,
                        base_path: str | None = None) -> ServingExport:
    """The export run in this process (the export_serving command): recorded as the team's
    export like a worker's, never sent to the broker. `folder` (as TF Serving sees it at
    `base_path`) instead of the team's serving folder. Raises what the writer raised, with the
    export FAILED."""
    with transaction.atomic():  # claimed before anyone sees it queued (the reaper would send it to a worker)
        export = ServingExport.objects.create(team_id=team.pk, reason="command", created_by=user)
        export = job_claim(kind=JOB_KINDS["serving_exports"], pk=export.pk,
                           worker_host=f"{socket.gethostname()} (export_serving)")
    started = time.monotonic()
    try:
        report = serving_export_write(export=export, folder=folder, base_path=base_path)
    except Exception as exc:
        job_fail(kind=JOB_KINDS["serving_exports"], pk=export.pk, attempt=export.attempts,
                 error=f"{type(exc).__name__}: {exc}")
        raise
    serving_export_complete(export_pk=export.pk, attempt=export.attempts, report=report,
                            duration_seconds=time.monotonic() - started)
    export.refresh_from_db()
    return export
