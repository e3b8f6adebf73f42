"""One export-serving task, on a worker of the cpu queue that mounts the serving folder: write
the TF Serving layout of a team's registry (experiments/serving/layout.py, through
services/serving_exports.py) as the registry stands once it holds the folder's lock. No TensorFlow:
the SavedModels are unzipped as the trained models' workers made them."""

from experiments.services.connections import with_db_retry
from experiments.services.job_kinds import JOB_KINDS
from experiments.services.serving_exports import serving_export_complete, serving_export_write
from experiments.serving.layout import LayoutSuperseded
from workers.jobs.runner import JobRun, JobWork, host_environment
from workers.trial_stops import TrialCancelled


def _work(run: JobRun) -> bool:
    try:
        report = serving_export_write(export=run.row)
    except LayoutSuperseded:
        raise TrialCancelled() from None  # no longer this attempt's before anything moved: nothing written
    # Refused (requeued after a stale heartbeat) once the layout was in place: it is whole, and the
    # next attempt writes the registry as it stands then. A crash leaves the previous layout.
    return with_db_retry(serving_export_complete, export_pk=run.pk, attempt=run.attempt, report=report,
                         environment=run.environment, duration_seconds=run.seconds())


WORK = JobWork(_work, keras=False, environment=host_environment)


def export_serving(*, export_pk: int) -> str:
    return WORK.run(JOB_KINDS["serving_exports"], export_pk)
