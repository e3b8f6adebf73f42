"""The periodic job that keeps trials, studies, all five job kinds and notification deliveries moving; database
and broker only, so the reaper-leader runs it in its main process beside busy children."""

import logging

from experiments.services.conversions import conversions_reap
from experiments.services.model_runs import models_reap
from experiments.services.notification_delivery import deliveries_resend_due
from experiments.services.predictions import predictions_reap
from experiments.services.serving_exports import serving_exports_reap
from experiments.services.trial_reaper import studies_refill, trials_reap_stale
from experiments.services.trial_reruns import reruns_reap

log = logging.getLogger(__name__)


def reap() -> dict:
    """Each part, and each row within it, on its own: one failure is logged and never stops
    the rest."""
    parts = {"trials_reaped": trials_reap_stale, "wakeups_sent": studies_refill, "models": models_reap,
             "reruns": reruns_reap, "conversions": conversions_reap,
             "serving_exports": serving_exports_reap, "predictions": predictions_reap,
             "deliveries_resent": deliveries_resend_due}
    done = {}
    for name, part in parts.items():
        try:
            done[name] = part()
        except Exception:
            log.exception("reaper step %s failed; the others went on", name)
    return done
