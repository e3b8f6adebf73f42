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
        study.last_activity = timezone.now()
        study.save(update_fields=["status", "message", "started", "finished", "last_activity"])
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


def study_update_budget(*, study: Study, max_trials: int, parallelism: int) -> Study:
    """Max trials and parallelism may change while a study runs; more parallelism wakes
    more workers at once, less lets running trials finish without successors."""
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        started = Trial.objects.filter(study=study).order_by().values("trial_id").distinct().count()
        if max_trials < started:
            raise StudyError(f"{started} trials have already started; max trials cannot be lower than that.")
        if not 1 <= parallelism <= 64:
            raise StudyError("Parallelism must be between 1 and 64.")
        extra = parallelism - study.parallelism
        study.max_trials, study.parallelism = max_trials, parallelism
        study.save(update_fields=["max_trials", "parallelism"])
        if study.status == Study.Status.RUNNING and extra > 0:
            trial_tasks_enqueue(study_id=study.id, queue=study.queue, count=extra)
    return study
