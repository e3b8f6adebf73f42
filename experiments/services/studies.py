"""Studies: create, start (or resume), cancel."""

from django.db import transaction
from django.utils import timezone

from experiments.models import Dataset, Study, Team, Trial
from experiments.search_space import grid_size, validate_search_space
from experiments.services.queueing import trial_tasks_enqueue


class StudyError(ValueError):
    pass


def study_create(*, team: Team, user, dataset: Dataset, name: str, hypermodel: str,
                 search_space: list, **options) -> Study:
    if dataset.team_id != team.id:
        raise StudyError("That dataset does not belong to your team.")
    rows = validate_search_space(search_space)
    if options.get("tuner") == Study.Tuner.GRID and grid_size(rows) is None:
        raise StudyError("Grid search needs a finite grid: give every Float a step, or use another tuner.")
    return Study.objects.create(team=team, created_by=user, dataset=dataset, name=name.strip(),
                                hypermodel=hypermodel, search_space=rows, **options)


def study_start(*, study: Study) -> Study:
    """Start a new study, or resume a cancelled or failed one where it left off."""
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        if not study.can_start:
            raise StudyError(f"The study is {study.get_status_display().lower()}; it cannot be started now.")
        study.status = Study.Status.RUNNING
        study.message = ""
        study.started = study.started or timezone.now()
        study.finished = None
        study.save(update_fields=["status", "message", "started", "finished"])
        trial_tasks_enqueue(study_id=study.id, queue=study.queue, count=study.parallelism)
    return study


def study_cancel(*, study: Study) -> Study:
    """Stop the study; each running trial notices at its next epoch end and stops."""
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        if study.status != Study.Status.RUNNING:
            raise StudyError("Only a running study can be cancelled.")
        study.status = Study.Status.CANCELLED
        study.message = "Cancelled by a user."
        study.finished = timezone.now()
        study.save(update_fields=["status", "message", "finished"])
    return study


def study_running_trial_count(*, study: Study) -> int:
    return Trial.objects.filter(study=study, status=Trial.Status.RUNNING).count()
