"""The trial reaper: stale RUNNING trials become LOST and studies whose wake-ups went missing get new ones, so a
study keeps moving whatever happens to workers and the broker."""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from experiments.models import Study, Trial
from experiments.selectors.trials import trial_running_count
from experiments.services.notifications import notify_trial_lost
from experiments.services.resends import resend_due
from experiments.services.studies import study_locked, study_wake
from experiments.services.trial_claims import devices_held
from experiments.services.trial_oracle import TELL_TUNER
from experiments.states import StudyStatus, TrialStatus

log = logging.getLogger(__name__)


def trials_reap_stale(*, now=None) -> int:
    """Stale RUNNING trials become LOST and their slots get wake-ups; database only, so it runs beside busy trials, and
    one bad row never stops the others."""
    now = now or timezone.now()
    stale_before = now - timedelta(seconds=settings.TRIAL_STALE_SECONDS)
    stale = Trial.objects.filter(status=TrialStatus.RUNNING, heartbeat__lt=stale_before)
    reaped = 0
    for pk, study_id, worker in stale.values_list("pk", "study_id", "worker_name"):
        error = (f"Lost: the worker {worker or 'running it'} stopped heartbeating "
                 f"for over {settings.TRIAL_STALE_SECONDS}s.")
        try:
            reaped += _reap_trial(pk, study_id, stale_before, error)
        except Exception:
            log.exception("the reaper could not finish lost trial %s; it tries again next time", pk,
                          extra={"study_id": study_id, "trial_id": pk})
    return reaped


def _reap_trial(pk: int, study_id: int, stale_before, error: str) -> bool:
    with transaction.atomic():
        study = study_locked(study_id)
        row = Trial.objects.select_for_update().get(pk=pk)
        if row.status != TrialStatus.RUNNING or row.heartbeat >= stale_before:
            return False  # it finished, or heartbeat, since the reaper looked: its worker is alive
        row.study = study
        counts = study.status == StudyStatus.RUNNING
        now = timezone.now()
        row.status, row.error, row.finished = TrialStatus.LOST, error, now
        row.duration_seconds = (now - row.started).total_seconds()
        # Its devices were held until its worker's last heartbeat, not while the reaper waited.
        row.device_kind, devices = devices_held(row.compute, study.queue)
        row.device_seconds = max((row.heartbeat - row.started).total_seconds(), 0.0) * devices
        row.kt_state = {**row.kt_state, TELL_TUNER: "fail" if counts else "release"}
        row.save(update_fields=["status", "error", "finished", "duration_seconds", "device_kind", "device_seconds",
                                "kt_state"])
        notify_trial_lost(trial=row, study=study, runs_again=counts)
        if counts:
            study_wake(study, study.parallelism - trial_running_count(study=study) - study.wakeups_pending)
        return True


def studies_refill(*, now=None) -> int:
    """Running studies with free slots that no wake-up in flight covers get wake-ups, busy or
    not: a wake-up lost by the broker never leaves a study running on fewer slots."""
    now = now or timezone.now()
    sent = 0
    for study_id in Study.objects.filter(status=StudyStatus.RUNNING).values_list("pk", flat=True):
        try:
            with transaction.atomic():
                study = Study.objects.select_for_update(skip_locked=True).filter(pk=study_id).first()
                if study is None or study.status != StudyStatus.RUNNING:
                    continue  # busy under someone's lock right now, or it just ended
                if not resend_due(study.last_wakeup, study.wakeup_resends, now):
                    continue
                missing = study.parallelism - trial_running_count(study=study)
                if missing <= 0:
                    continue
                study.wakeups_pending = 0  # what was sent this long ago is not coming
                study.wakeup_resends += 1
                study_wake(study, missing)
                sent += missing
        except Exception:
            log.exception("the reaper could not refill study %s; it tries again next time", study_id,
                          extra={"study_id": study_id})
    return sent
