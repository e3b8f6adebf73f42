"""Ensemble recipes' pages: the list, the form with a live preview, one recipe's page and its runs; the checks are
forms/recipes.py's, shared with the API."""

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from experiments.errors import TuneboardError
from experiments.forms.recipes import RecipeCloneForm, RecipeForm, recipe_initial, rule_in_words
from experiments.models import EnsembleRecipe, RecipeRun
from experiments.selectors.recipe_lists import recipe_runs, recipe_triggers_stopped, team_recipe, team_recipes
from experiments.selectors.recipes import Rule, recipe_candidates
from experiments.services.recipes import (
    recipe_clone,
    recipe_create,
    recipe_delete,
    recipe_run_now,
    recipe_take_over,
    recipe_update,
)
from experiments.views.access import editor_required, forbidden, found_or_404, team_required

COLLAPSED_WARNING = "This ensemble equals its best member, so it adds nothing:"
RUNS_IN_PROGRESS = (RecipeRun.Status.WAITING, RecipeRun.Status.BUILDING)


# The fields the save checks that the preview reads (the sources' errors are shown apart, first).
PREVIEWED_FIELDS = ("metric", "direction", "top_k", "per_group_max", "group_by", "members_as", "correlation_cap")


def get_recipe_for_user(request, recipe_id: int) -> EnsembleRecipe:
    return found_or_404(team_recipe(team=request.team, recipe_id=recipe_id), EnsembleRecipe)


def preview_context(rule: Rule | None, *, savable: bool = True) -> dict:
    """The preview's candidates, picked or not and why, and its warnings (a recipe may wait for
    studies: fewer than two picks is a warning, not an error)."""
    if rule is None:
        return {"candidates": [], "warnings": ["Pick a dataset and sources to see who would be picked."]}
    candidates = recipe_candidates(rule)
    picked = sum(c.picked for c in candidates)
    warnings = []
    if picked < 2:
        warnings.append(f"Today the rule picks {picked} member{'s' if picked != 1 else ''}: a run needs at least two."
                        + (" The recipe can be saved and will wait for its studies." if savable else ""))
    elif len({c.hypermodel for c in candidates if c.picked}) == 1 and len({c.study_id for c in candidates
                                                                            if c.picked}) == 1:
        warnings.append("Every pick comes from one study of one hypermodel: such members are usually too alike for "
                        "the ensemble to beat its best member.")
    return {"candidates": candidates, "picked_count": picked, "warnings": warnings}


def _form_page(request, form: RecipeForm, recipe: EnsembleRecipe | None, title: str):
    rule = form.rule() if form.is_bound else (Rule.of(recipe) if recipe else None)
    return render(request, "recipes/form.html", {"form": form, "recipe": recipe, "title": title,
                                                 **preview_context(rule, savable=not (form.is_bound and form.errors))})


@team_required
def recipe_list(request):
    return render(request, "recipes/list.html", {"recipes": team_recipes(team=request.team)})


def _save(request, form: RecipeForm, save) -> EnsembleRecipe | None:
    if not form.is_valid():
        return None
    try:
        return save(form.cleaned_data)
    except TuneboardError as exc:
        form.add_error(None, str(exc))
        return None


@editor_required
def recipe_new(request):
    form = RecipeForm(request.POST or None, team=request.team)
    if request.method == "POST":
        recipe = _save(request, form, lambda data: recipe_create(team=request.team, user=request.user, data=data))
        if recipe is not None:
            messages.success(request, f"Saved the recipe {recipe.name}.")
            return redirect("recipe_detail", recipe_id=recipe.id)
    return _form_page(request, form, None, "New ensemble recipe")


@editor_required
def recipe_edit(request, recipe_id: int):
    recipe = get_recipe_for_user(request, recipe_id)
    if request.method == "POST":
        form = RecipeForm(request.POST, team=request.team, instance=recipe)
        saved = _save(request, form, lambda data: recipe_update(recipe=recipe, user=request.user, data=data))
        if saved is not None:
            messages.success(request, f"Saved the recipe {saved.name}.")
            return redirect("recipe_detail", recipe_id=saved.id)
    else:
        form = RecipeForm(initial=recipe_initial(recipe), team=request.team, instance=recipe)
    return _form_page(request, form, recipe, f"Edit {recipe.name}")


@editor_required
def recipe_clone_view(request, recipe_id: int):
    recipe = get_recipe_for_user(request, recipe_id)
    form = RecipeCloneForm(request.POST or None, team=request.team, initial={"name": f"{recipe.name}-copy"})
    if request.method == "POST" and form.is_valid():
        copy = recipe_clone(recipe=recipe, user=request.user, name=form.cleaned_data["name"])
        messages.success(request, f"Cloned {recipe.name} as {copy.name}.")
        return redirect("recipe_edit", recipe_id=copy.id)
    return render(request, "recipes/clone.html", {"recipe": recipe, "form": form})


def _runs_context(recipe: EnsembleRecipe) -> dict:
    runs = recipe_runs(recipe=recipe)
    # Polled while a run waits or builds; the response after the last one ends carries no trigger.
    return {"recipe": recipe, "runs": runs, "collapsed_warning": COLLAPSED_WARNING,
            "polling": any(run.status in RUNS_IN_PROGRESS for run in runs)}


@team_required
def recipe_detail(request, recipe_id: int):
    recipe = get_recipe_for_user(request, recipe_id)
    return render(request, "recipes/detail.html", {
        **_runs_context(recipe), "rule_words": rule_in_words(recipe),
        "studies": list(recipe.source_studies.order_by("name")),
        "triggers_stopped": recipe_triggers_stopped(recipe=recipe), **preview_context(Rule.of(recipe))})


@team_required
def recipe_runs_live(request, recipe_id: int):
    """The recipe page's runs, which htmx refreshes while one waits or builds."""
    return render(request, "recipes/_runs.html", _runs_context(get_recipe_for_user(request, recipe_id)))


@team_required
def recipe_preview(request):
    """The form's live preview (htmx posts the form as it is being filled in): an HTML fragment."""
    data = request.POST if request.method == "POST" else request.GET
    form = RecipeForm(data, team=request.team)
    form.is_valid()  # the preview reads what is valid so far; the errors are the save's to show
    source_errors = [e for name in ("dataset", "source_studies", "source_tag") for e in form.errors.get(name, [])]
    # A rule field the save would refuse (Top K 0, a cap of 0): the preview falls back to its default,
    # so say so rather than show picks the saved recipe would not make.
    rule_errors = [f"{e} The preview uses the default ({form.fields[name].initial})."
                   if form.fields[name].initial not in (None, "") else e
                   for name in PREVIEWED_FIELDS for e in form.errors.get(name, [])]
    context = preview_context(form.rule(), savable=not (source_errors or rule_errors))
    context["warnings"] = [*source_errors, *rule_errors, *context["warnings"]]
    return render(request, "recipes/_preview.html", context)


@team_required
def recipe_preview_saved(request, recipe_id: int):
    recipe = get_recipe_for_user(request, recipe_id)
    return render(request, "recipes/_preview.html", preview_context(Rule.of(recipe)))


@require_POST
@editor_required
def recipe_run_view(request, recipe_id: int):
    recipe = get_recipe_for_user(request, recipe_id)
    try:
        run = recipe_run_now(recipe=recipe, user=request.user, reason=f"Run now by {request.user.username}")
    except TuneboardError as exc:  # a run still waiting or building among them: nothing started
        messages.error(request, str(exc))
    else:
        if run.status == RecipeRun.Status.COMPLETED:  # the registry already holds its ensemble
            verdict = run.comparison["verdict"]
            messages.info(request, f"Run {run.number} of {recipe.name} built nothing. "
                                   f"{verdict[:1].upper()}{verdict[1:]}.")
        else:
            messages.success(request, f"Started run {run.number} of {recipe.name}.")
    return redirect("recipe_detail", recipe_id=recipe.id)


@require_POST
@team_required
def recipe_take_over_view(request, recipe_id: int):
    recipe = get_recipe_for_user(request, recipe_id)
    if not request.membership.is_owner:
        return forbidden(request, "Only the team's owners can take a recipe over; ask an owner.")
    try:
        recipe_take_over(recipe=recipe, user=request.user)
    except TuneboardError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{recipe.name} now acts for you: its triggered runs start again, as yours.")
    return redirect("recipe_detail", recipe_id=recipe.id)


@require_POST
@editor_required
def recipe_delete_view(request, recipe_id: int):
    recipe = get_recipe_for_user(request, recipe_id)
    name = recipe.name
    recipe_delete(recipe=recipe, user=request.user)
    messages.success(request, f"Deleted the recipe {name}; the ensembles its runs built are kept.")
    return redirect("recipe_list")
