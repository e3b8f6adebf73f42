"""Studies: create and change budgets (starting, cancelling and running them: trial_runs)."""

from collections.abc import Iterable

from django.db import transaction

from experiments.models import Dataset, Study, Team, Trial
from experiments.services.trial_runs import StudyError, study_wake
from experiments.services.warm_starts import DEFAULT_TOP_K, WarmStartError, seed_count_error, warm_start_seeds
from experiments.tuning.bounds import MAX_SEED
from experiments.tuning.compute_options import compute_errors
from experiments.tuning.hypermodel_catalog import hypermodels_for_kind
from experiments.tuning.pruning_options import MODEL_FIELDS as PRUNING_FIELDS
from experiments.tuning.pruning_options import pruning_errors
from experiments.tuning.search_space import grid_size, validate_search_space

# The study's numeric settings: (lowest, highest) allowed. The form shows them; this enforces them.
LIMITS = {"max_trials": (1, 10000), "executions_per_trial": (1, 10), "epochs": (1, 1000),
          "batch_size": (1, 65536), "patience": (1, 1000), "parallelism": (1, 64),
          "initial_random_trials": (1, 10000), "max_retries_per_trial": (0, 10),
          "max_consecutive_failed_trials": (1, 1000), "seed": (0, MAX_SEED)}
HYPERBAND_MIN_EPOCHS = 3
COMPUTE_DEFAULTS = {"queue": "cpu", "precision": "float32", "jit_compile": "auto", "steps_per_execution": 1,
                    "devices_per_trial": 1}
COMPUTE_FIELDS = tuple(COMPUTE_DEFAULTS)


def study_settings_errors(*, search_space: list | None = None, **options) -> dict[str, str]:
    """Every rule a study's settings must meet, as {field: message}; empty when all hold."""
    errors = {}
    for name, (low, high) in LIMITS.items():
        value = options.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            errors[name] = f"Must be a whole number from {low:,} to {high:,}."
    tuner = options.get("tuner")
    if tuner == Study.Tuner.GRID and search_space and grid_size(search_space) is None:
        errors["tuner"] = "Grid search needs a finite grid: give every Float a step, or use another tuner."
    epochs = options.get("epochs") or 0
    if tuner == Study.Tuner.HYPERBAND and "epochs" not in errors and epochs < HYPERBAND_MIN_EPOCHS:
        errors["epochs"] = f"Hyperband needs at least {HYPERBAND_MIN_EPOCHS} epochs to form brackets."
    if options.get("initial_random_trials") is not None and tuner != Study.Tuner.BAYESIAN:
        errors["initial_random_trials"] = "Initial random trials only apply to Bayesian optimisation."
    compute = {name: options[name] for name in COMPUTE_FIELDS if name in options}
    if compute:
        errors.update(compute_errors(**{**COMPUTE_DEFAULTS, **compute}))
    pruning = {name: options[name] for name in PRUNING_FIELDS if name in options}
    if pruning:
        errors.update(pruning_errors(tuner=tuner, epochs=options.get("epochs"), **pruning))
    dataset, hypermodel = options.get("dataset"), options.get("hypermodel")
    if dataset is not None and hypermodel:
        # A name this process does not know is left to the worker, which reports it on the trial.
        reason = dict((entry.name, why) for entry, why in hypermodels_for_kind(dataset.kind)).get(hypermodel)
        if reason:
            errors["hypermodel"] = f"The {hypermodel} hypermodel {reason}."
    return errors


def _refuse(errors: dict[str, str]) -> None:
    if errors:
        raise StudyError(" ".join(f"{name.replace('_', ' ').capitalize()}: {message}"
                                  for name, message in errors.items()))


def study_create(*, team: Team, user, dataset: Dataset, name: str, hypermodel: str,
                 search_space: list, seed_from: Iterable[Study] = (), top_k: int = DEFAULT_TOP_K,
                 **options) -> Study:
    """With `seed_from`, the study warm-starts from the best `top_k` trials of each of those studies."""
    if dataset.team_id != team.id:
        raise StudyError("That dataset does not belong to your team.")
    rows = validate_search_space(search_space)
    _refuse(study_settings_errors(search_space=rows, dataset=dataset, hypermodel=hypermodel, **options))
    seeds = []
    if seed_from:
        try:
            seeds = warm_start_seeds(team=team, studies=seed_from, top_k=top_k, search_space=rows,
                                     hypermodel=hypermodel).seeds
        except WarmStartError as exc:
            raise StudyError(str(exc)) from None
        max_trials = options.get("max_trials") or Study._meta.get_field("max_trials").default
        if too_many := seed_count_error(seeds=len(seeds), max_trials=max_trials):
            raise StudyError(too_many)
    return Study.objects.create(team=team, created_by=user, dataset=dataset, name=name.strip(),
                                hypermodel=hypermodel, search_space=rows, seeds=seeds, **options)


def study_update_budget(*, study: Study, max_trials: int, parallelism: int) -> Study:
    """Max trials and parallelism may change while a study runs; more parallelism wakes
    more workers at once, less lets running trials finish without successors."""
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        if study.status == Study.Status.COMPLETED:
            raise StudyError("This study has completed and cannot run again, so its budget no longer changes "
                             "anything; clone it to search further.")
        _refuse(study_settings_errors(search_space=None, max_trials=max_trials, parallelism=parallelism))
        started = Trial.objects.filter(study=study).order_by().values("trial_id").distinct().count()
        if max_trials < started:
            raise StudyError(f"{started} trials have already started; max trials cannot be lower than that.")
        extra = parallelism - study.parallelism
        study.max_trials, study.parallelism = max_trials, parallelism
        study.save(update_fields=["max_trials", "parallelism"])
        if study.status == Study.Status.RUNNING and extra > 0:
            study_wake(study, extra)
    return study
