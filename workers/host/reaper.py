"""The periodic job that keeps trials, studies, all five job kinds and notification deliveries moving; database
and broker only, so the reaper-leader runs it in its main process beside busy children."""

import logging
from functools import partial

from experiments.services.job_kinds import JOB_KINDS
from experiments.services.jobs import jobs_reap
from experiments.services.notification_delivery import deliveries_resend_due
from experiments.services.preemption import trials_preempt
from experiments.services.trial_reaper import studies_refill, trials_reap_stale

log = logging.getLogger(__name__)


def reap() -> dict:
    """Each part, and each row within it, on its own: one failure is logged and never stops
    the rest."""
    parts = {"trials_reaped": trials_reap_stale, "wakeups_sent": studies_refill,
             **{name: partial(jobs_reap, kind=kind) for name, kind in JOB_KINDS.items()},  # every job kind
             "deliveries_resent": deliveries_resend_due, "trials_preempted": trials_preempt}
    done = {}
    for name, part in parts.items():
        try:
            done[name] = part()
        except Exception:
            log.exception("reaper step %s failed; the others went on", name)
    return done
