import json

from django.contrib import messages
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from experiments.forms.studies import StudyBudgetForm, StudyForm
from experiments.forms.study_extensions import StudyExtendForm
from experiments.forms.trained_models import ModelRequestForm
from experiments.models import Study, Trial
from experiments.presentation import figures
from experiments.presentation.csv_export import csv_response
from experiments.selectors.fleet import study_capacity
from experiments.selectors.studies import (
    clone_values,
    study_eta_seconds,
    study_progress,
    study_pruning_savings,
    team_studies,
)
from experiments.selectors.studies import study_chart_data as study_chart_data_for
from experiments.selectors.trained_models import study_models
from experiments.selectors.trials import (
    objective_names,
    pareto_rows,
    study_best_trial,
    study_top_trials,
    study_trials_by_score,
    study_trials_export,
    trial_epoch_rows,
    trial_learning_curves,
    trials_compared,
)
from experiments.services.recipes import RecipeError, study_tags_set
from experiments.services.studies import StudyError, study_cancel, study_create, study_start, study_update_budget
from experiments.services.study_extensions import EXTENDABLE, ExtensionRefused, study_extend
from experiments.services.trained_models import default_model_name, trial_model_name
from experiments.services.trials import TrialNotesError, trial_annotate
from experiments.tuning import pruners
from experiments.tuning.bounds import parse_id
from experiments.tuning.hypermodel_catalog import hypermodel_entries
from experiments.tuning.objectives import as_lines
from experiments.tuning.pruning_options import PruningSettings
from experiments.tuning.pruning_options import describe as describe_pruning
from experiments.tuning.stopping_rules import StoppingRules
from experiments.tuning.stopping_rules import describe as describe_stopping
from experiments.views.access import (
    editor_required,
    get_studies_for_user,
    get_study_for_user,
    get_trial_for_user,
    team_required,
)
from experiments.views.job_logs import trial_logs_context
from experiments.views.trial_reruns import reruns_context

# A message true only while the study runs ("…started."): the page drops it when the study is
# not running, and the live part removes it from an open page when the study ends.
WHILE_RUNNING = "while-running"


@team_required
def study_list(request):
    return render(request, "studies/list.html", {"studies": team_studies(team=request.team)})


@editor_required
def study_new(request):
    initial = {}
    if "dataset" in request.GET:
        initial["dataset"] = request.GET["dataset"]
    return _study_form_page(request, initial)


@editor_required
def study_clone(request, study_id: int):
    """The new-study form filled in from a study: change what differs (the dataset, say) and
    warm-start from its best trials."""
    original = get_study_for_user(request, study_id)
    initial = clone_values(original)
    initial["search_space"] = json.dumps(initial["search_space"], indent=1)
    for name in ("extra_objectives", "constraints"):
        initial[name] = as_lines(initial[name])
    initial["seed_from"] = [original.pk] if study_top_trials(study=original, n=1) else []
    return _study_form_page(request, initial, original=original)


def _seed_studies_for_user(request) -> None:
    """Studies to seed from are another team's objects like any other: 404, not a form error."""
    wanted = [pk for value in request.POST.getlist("seed_from") if (pk := parse_id(value))]
    if wanted:
        get_studies_for_user(request, wanted)


def _study_form_page(request, initial: dict, original: Study | None = None):
    _seed_studies_for_user(request)
    form = StudyForm(request.POST or None, team=request.team, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = dict(form.cleaned_data)
        try:
            study = study_create(team=request.team, user=request.user, **data)
            if "start" in request.POST:
                study_start(study=study)
        except StudyError as exc:
            form.add_error(None, str(exc))
        else:
            started = "start" in request.POST
            messages.success(request, f"Study {study.name} {'started' if started else 'saved'}.",
                             extra_tags=WHILE_RUNNING if started else "")
            for note in form.warm_start_notes:
                messages.info(request, note)
            return redirect("study_detail", study_id=study.id)
    spaces = {name: entry.default_space for name, entry in hypermodel_entries().items()}
    return render(request, "studies/new.html", {
        "form": form, "search_space_errors": form.search_space_errors, "hypermodel_spaces": spaces,
        "original": original,
    })


def _trial_status(request) -> str:
    """The trials table's state filter; anything unknown shows every trial."""
    value = request.GET.get("status", "")
    return value if value in Trial.Status.values else ""


def _live_context(study: Study, trial_status: str = "") -> dict:
    progress = study_progress(study=study)
    capacity = study_capacity(study=study)
    context = {
        "study": study,
        "progress": progress,
        "capacity": capacity,
        "eta_seconds": study_eta_seconds(study=study, capacity=capacity),
        "best": study_best_trial(study=study),
        **dict(zip(("trials", "trial_count"), study_trials_by_score(study=study, status=trial_status), strict=True)),
        "trial_status": trial_status,
        "status_filters": [(value, label, progress["by_status"].get(value, 0))
                           for value, label in Trial.Status.choices if progress["by_status"].get(value)],
        "pruning_savings": study_pruning_savings(study=study, progress=progress),
        "search_space_names": [row["name"] for row in study.search_space],
        "no_live_worker": study.is_active and not capacity["slots"],
        "pareto": pareto_rows(study=study) if study.extra_objectives else None,
        "objective_names": objective_names(study),
    }
    for trial in context["trials"]:
        trial.still_improving = (trial.status == trial.Status.COMPLETED
                                 and figures.trial_still_improving(best_epoch=trial.best_epoch, epochs=study.epochs))
    context["study_models"], context["study_model_count"] = study_models(study=study)
    context["has_completed_trials"] = context["best"] is not None
    context["model_form"] = ModelRequestForm(study=study)
    context["budget_form"] = StudyBudgetForm(instance=study)
    context["extend_form"] = StudyExtendForm(study=study) if study.status in EXTENDABLE else None
    context["segments"] = [{**segment, "tuner_label": dict(Study.Tuner.choices).get(segment["tuner"], segment["tuner"])}
                           for segment in study.segments]
    # Keep polling while anything shown is in progress (trials of a cancelled study finish
    # their epoch; models are built): the response after the last of them ends carries no
    # trigger, so the page settles with nothing in progress left on it.
    context["polling"] = (study.is_active or progress["running"] > 0
                          or any(m.is_active for m in context["study_models"]))
    return context


def _current_messages(request, study: Study) -> list:
    """The pending messages, less those about a run that is already over."""
    pending = list(messages.get_messages(request))
    if study.is_active:
        return pending
    return [m for m in pending if WHILE_RUNNING not in m.extra_tags.split()]


@team_required
def study_detail(request, study_id: int):
    study = get_study_for_user(request, study_id)
    context = _live_context(study, _trial_status(request))
    context["messages"] = _current_messages(request, study)
    context["pruning_line"] = describe_pruning(PruningSettings.from_study(study))
    context["stopping_line"] = describe_stopping(StoppingRules.from_study(study), metric=study.objective_metric,
                                                 direction=study.objective_direction)
    return render(request, "studies/detail.html", context)


@team_required
def study_live(request, study_id: int):
    """The part of the study page that htmx refreshes while the study runs."""
    study = get_study_for_user(request, study_id)
    context = _live_context(study, _trial_status(request))
    # The page last saw the study running (or an older page that does not say): swap in the
    # parts that depend on it having ended.
    seen = request.GET.get("seen", Study.Status.RUNNING)
    context["just_ended"] = not study.is_active and seen == Study.Status.RUNNING
    return render(request, "studies/_live.html", context)


def _act_on_study(request, study_id: int, action, success: str, extra_tags: str = ""):
    """Run one study service for a POST and report its outcome as a message."""
    study = get_study_for_user(request, study_id)
    try:
        action(study=study)
        messages.success(request, success, extra_tags=extra_tags)
    except StudyError as exc:
        messages.error(request, str(exc))
    return redirect("study_detail", study_id=study.id)


@require_POST
@editor_required
def study_start_view(request, study_id: int):
    resumed = get_study_for_user(request, study_id).started is not None
    return _act_on_study(request, study_id, study_start, "Study resumed." if resumed else "Study started.",
                         extra_tags=WHILE_RUNNING)


@require_POST
@editor_required
def study_cancel_view(request, study_id: int):
    return _act_on_study(request, study_id, study_cancel,
                         "Study cancelled; running trials stop at the end of their current epoch.")


@require_POST
@editor_required
def study_budget_view(request, study_id: int):
    study = get_study_for_user(request, study_id)
    form = StudyBudgetForm(request.POST, instance=Study.objects.get(pk=study.pk))
    if not form.is_valid():
        messages.error(request, " ".join(e for errors in form.errors.values() for e in errors))
    else:
        try:
            study_update_budget(study=study, **form.cleaned_data)
            messages.success(request, "Max trials, parallelism and priority updated.")
        except StudyError as exc:
            messages.error(request, str(exc))
    return redirect("study_detail", study_id=study.id)


@require_POST
@editor_required
def study_extend_view(request, study_id: int):
    study = get_study_for_user(request, study_id)
    form = StudyExtendForm(request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(e for errors in form.errors.values() for e in errors))
        return redirect("study_detail", study_id=study.id)
    try:
        study_extend(study=study, user=request.user, **form.cleaned_data)
        messages.success(request, "Study extended: its next trials continue the numbering, and the tuner was told "
                                  "every trial so far.")
    except ExtensionRefused as exc:  # the form's own words, without the field names the API needs
        messages.error(request, " ".join(exc.errors.values()))
    except StudyError as exc:
        messages.error(request, str(exc))
    return redirect("study_detail", study_id=study.id)


@team_required
def trial_detail(request, study_id: int, trial_pk: int):
    trial = get_trial_for_user(request, study_id, trial_pk)
    study = trial.study
    epochs = trial_epoch_rows(trial=trial)
    metric_names = sorted({name for row in epochs for name in row["metrics"]})
    still_improving = (trial.status == trial.Status.COMPLETED
                       and figures.trial_still_improving(best_epoch=trial.best_epoch, epochs=study.epochs))
    reruns = reruns_context(trial)
    return render(request, "studies/trial.html", {
        **reruns, **trial_logs_context(trial),
        "trial": trial, "study": study, "epochs": epochs, "metric_names": metric_names,
        "best_metrics": {"validation": figures.checkpoint_metrics(trial.metrics),
                         "train": figures.training_metrics(trial.metrics)},
        "costs": figures.cost_figures(trial.metrics),
        "still_improving": figures.STILL_IMPROVING if still_improving else None,
        "curves": trial_learning_curves(trial=trial, epoch_rows=epochs, reruns=reruns["charted"]) if epochs else None,
        "pruned_reason": pruners.explain(trial.pruning, study.objective_metric),
        "model_form": ModelRequestForm(single_trial=True, initial={"name": trial_model_name(study, trial)},
                                       study=study),
    })


@team_required
def study_chart_data(request, study_id: int):
    """The charts' data as JSON; the page polls it while the study runs."""
    return JsonResponse(study_chart_data_for(study=get_study_for_user(request, study_id)))


@team_required
def study_trials_csv(request, study_id: int):
    study = get_study_for_user(request, study_id)
    header, rows = study_trials_export(study=study)
    return csv_response(f"{default_model_name(study)}-trials.csv", header, rows)


MAX_COMPARED = 4


@team_required
def study_compare(request, study_id: int):
    """Two to four trials side by side: values, results and learning curves."""
    study = get_study_for_user(request, study_id)
    picked = [pk for value in request.GET.getlist("trials") if (pk := parse_id(value))]
    compared = trials_compared(study=study, trial_pks=picked)
    if not 2 <= len(compared["trials"]) <= MAX_COMPARED:
        messages.error(request, f"Pick between 2 and {MAX_COMPARED} trials of this study to compare.")
        return redirect("study_detail", study_id=study.id)
    return render(request, "studies/compare.html", {"study": study, **compared})


@require_POST
@editor_required
def trial_annotate_view(request, study_id: int, trial_pk: int):
    trial = get_trial_for_user(request, study_id, trial_pk)
    try:
        trial_annotate(trial=trial, notes=request.POST.get("notes", ""), tags=request.POST.get("tags", ""))
        messages.success(request, "Notes and tags saved.")
    except TrialNotesError as exc:
        messages.error(request, str(exc))
    return redirect("trial_detail", study_id=study_id, trial_pk=trial.pk)


@require_POST
@editor_required
def study_tags_view(request, study_id: int):
    """The study page's tags (comma-separated): a recipe may draw from every study with a tag."""
    study = get_study_for_user(request, study_id)
    try:
        study_tags_set(study=study, tags=request.POST.get("tags", ""))
        messages.success(request, "Tags saved.")
    except RecipeError as exc:
        messages.error(request, str(exc))
    return redirect("study_detail", study_id=study.id)
