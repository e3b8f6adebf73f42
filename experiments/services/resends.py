"""When an unanswered message counts as lost: below services/jobs.py, so the deliveries that
jobs' notifications send can share the rule without importing the job-kind table."""

from datetime import timedelta

from django.conf import settings

# The wait before a re-send doubles with each unanswered one, up to 2**this times.
MAX_RESEND_DOUBLINGS = 5


def resend_due(last_sent, resends: int, now) -> bool:
    """True when a message sent at `last_sent` and still not picked up counts as lost. The wait
    doubles with each unanswered resend (capped), so a queue nobody serves does not fill up.
    Used for job tasks, study wake-ups and webhook deliveries alike."""
    wait = settings.RESEND_AFTER_SECONDS * 2 ** min(resends, MAX_RESEND_DOUBLINGS)
    return last_sent is None or last_sent < now - timedelta(seconds=wait)
