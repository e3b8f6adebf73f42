"""What a task's message runs on this worker: the work fair share puts first on its queue
(services/fair_share.py), a study's trial or a job of any kind, whichever one the message named."""

import socket

from experiments.services.connections import connections_close_expired, with_db_retry
from experiments.services.job_kinds import JOB_KINDS
from experiments.services.jobs import StudyTurn, job_claim, job_claim_own
from workers.jobs import conversions, predictions, reruns, serving_exports, trained_models, variants
from workers.jobs.runner import run_claimed
from workers.jobs.trials import run_next_trial, run_offered_trial

# Each kind's own part of a run, by its JOB_KINDS name.
WORK = {"models": trained_models.WORK, "reruns": reruns.WORK, "conversions": conversions.WORK,
        "serving_exports": serving_exports.WORK, "predictions": predictions.WORK, "variants": variants.WORK}


def run_claimed_job(row) -> str:
    return run_claimed(row, WORK[row.job_kind.name])


def run_wakeup(*, study_id: int, task_id: str, worker_name: str = "") -> str:
    """A study's wake-up: its trial, another study's, or a queued job (workers/jobs/trials.py)."""
    return run_next_trial(study_id=study_id, task_id=task_id, worker_name=worker_name,
                          run_claimed_job=run_claimed_job)


def run_job_message(*, kind_name: str, pk: int, task_id: str = "", worker_name: str = "") -> str:
    """A job's message: the job it names, another job, or a study's trial; when that study has no
    trial to give after all, the job it names."""
    connections_close_expired()
    kind, host = JOB_KINDS[kind_name], socket.gethostname()
    claimed = with_db_retry(job_claim, kind=kind, pk=pk, worker_host=host)
    if isinstance(claimed, StudyTurn):
        status = run_offered_trial(study_id=claimed.study_id, kind=kind, pk=pk, task_id=task_id,
                                   worker_name=worker_name)
        if status is not None:
            return status
        claimed = with_db_retry(job_claim_own, kind=kind, pk=pk, worker_host=host)
    if claimed is None:
        return "nothing to do"  # a duplicated delivery, or another worker has it
    return run_claimed_job(claimed)
