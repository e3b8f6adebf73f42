"""Ensemble recipes' writes (create, update, clone, take over, delete, a study's tags), each audited; the data comes
validated by forms/recipes.py, and runs are recipe_runs.py's."""

from django.db import IntegrityError, transaction
from django.utils import timezone

from experiments.errors import TuneboardError
from experiments.models import EnsembleRecipe, Membership, Study
from experiments.services.audit import audit_record
from experiments.services.recipe_runs import recipe_run_start
from experiments.tuning.bounds import control_character_problem

MAX_STUDY_TAGS = 10
MAX_STUDY_TAG_LENGTH = 40
# The recipe's own columns a form's cleaned data sets (the sources' studies are a relation).
_FIELDS = ("name", "description", "dataset", "source_tag", "metric", "direction", "top_k", "per_group_max",
           "group_by", "include_pruned", "correlation_cap", "members_as", "method", "greedy_rounds", "trigger",
           "register_as", "alias")


class RecipeError(TuneboardError):
    """Why a recipe change is refused; str(exc) is shown as is."""


def _audit(verb: str, recipe: EnsembleRecipe, changes: dict) -> None:
    audit_record(verb=verb, obj=recipe, team_id=recipe.team_id, changes=changes)


def _taken(name: str) -> RecipeError:
    return RecipeError(f"The team already has a recipe named {name!r}; pick another name.")


def _changes(before: dict, after: dict) -> dict:
    return {name: [before.get(name), after.get(name)] for name in after if before.get(name) != after.get(name)}


def _snapshot(recipe: EnsembleRecipe) -> dict:
    values = {name: getattr(recipe, f"{name}_id" if name == "dataset" else name) for name in _FIELDS}
    return {**values, "source_studies": sorted(recipe.source_studies.values_list("id", flat=True))}


@transaction.atomic
def recipe_create(*, team, user, data: dict) -> EnsembleRecipe:
    """A recipe from a valid RecipeForm's cleaned data."""
    try:
        with transaction.atomic():
            recipe = EnsembleRecipe.objects.create(team=team, created_by=user, acts_for=user,
                                                   **{name: data[name] for name in _FIELDS if name in data})
    except IntegrityError:
        raise _taken(data["name"]) from None  # a concurrent create of the same name
    recipe.source_studies.set(data.get("source_studies") or [])
    _audit("recipe.create", recipe, {"name": recipe.name})
    return recipe


@transaction.atomic
def recipe_update(*, recipe: EnsembleRecipe, user, data: dict) -> EnsembleRecipe:
    """Change a recipe to a valid RecipeForm's cleaned data; its runs keep the rule they applied."""
    before = _snapshot(recipe)
    for name in _FIELDS:
        if name in data:
            setattr(recipe, name, data[name])
    recipe.updated = timezone.now()
    try:
        with transaction.atomic():
            recipe.save()
    except IntegrityError:
        raise _taken(recipe.name) from None
    if "source_studies" in data:
        recipe.source_studies.set(data["source_studies"] or [])
    changes = _changes(before, _snapshot(recipe))
    if changes:
        _audit("recipe.update", recipe, changes)
    return recipe


@transaction.atomic
def recipe_clone(*, recipe: EnsembleRecipe, user, name: str) -> EnsembleRecipe:
    """A copy of the recipe's rule under `name` (checked by RecipeCloneForm), without its runs."""
    data = {name_: getattr(recipe, name_) for name_ in _FIELDS}
    data.update(name=name, source_studies=list(recipe.source_studies.all()))
    copy = recipe_create(team=recipe.team, user=user, data=data)
    _audit("recipe.clone", copy, {"from": recipe.name})
    return copy


@transaction.atomic
def recipe_take_over(*, recipe: EnsembleRecipe, user) -> EnsembleRecipe:
    """An owner makes the recipe act for them: its triggered runs start again (when its member has
    left or been demoted, they had stopped) and their builds and registry changes are theirs.
    Runs already started keep acting for whom they started for."""
    recipe = EnsembleRecipe.objects.select_for_update(of=("self",)).select_related("acts_for").get(pk=recipe.pk)
    if not Membership.objects.filter(team_id=recipe.team_id, user=user, role=Membership.Role.OWNER).exists():
        raise RecipeError("Only the team's owners can take a recipe over.")
    if recipe.acts_for_id == user.pk:
        raise RecipeError(f"{recipe.name} already acts for you.")
    before = recipe.acts_for.get_username() if recipe.acts_for else None
    recipe.acts_for, recipe.last_skipped, recipe.last_skipped_at = user, "", None
    recipe.updated = timezone.now()
    recipe.save(update_fields=["acts_for", "last_skipped", "last_skipped_at", "updated"])
    audit_record(verb="recipe.take_over", obj=recipe, team_id=recipe.team_id,
                 changes={"acts_for": [before, user.get_username()]}, actor=user)
    return recipe


@transaction.atomic
def recipe_delete(*, recipe: EnsembleRecipe, user) -> None:
    """The recipe and its runs' records; the ensembles its runs built stay (ordinary models)."""
    _audit("recipe.delete", recipe, {"name": recipe.name})
    recipe.delete()


def study_tags_set(*, study: Study, tags: str | list[str]) -> Study:
    """A study's tags, comma-separated (or a list), lower-cased, without repeats."""
    if problem := control_character_problem(tags, multiline=False):  # no form binds the tags
        raise RecipeError(f"Tags: {problem}")
    given = tags.split(",") if isinstance(tags, str) else tags
    cleaned: list[str] = []
    for tag in (str(t).strip().lower() for t in given):
        if not tag or tag in cleaned:
            continue
        if len(tag) > MAX_STUDY_TAG_LENGTH:
            raise RecipeError(f"The tag {tag[:MAX_STUDY_TAG_LENGTH]!r}… is longer than {MAX_STUDY_TAG_LENGTH} "
                              "characters.")
        cleaned.append(tag)
    if len(cleaned) > MAX_STUDY_TAGS:
        raise RecipeError(f"A study takes at most {MAX_STUDY_TAGS} tags; you gave {len(cleaned)}.")
    Study.objects.filter(pk=study.pk).update(tags=cleaned)
    study.tags = cleaned
    return study


def recipe_run_now(*, recipe: EnsembleRecipe, user, reason: str = ""):
    """Start a run of the recipe on demand, acting for `user`; refusals raise recipe_runs.RecipeRunError with the
    message to show."""
    return recipe_run_start(recipe=recipe, user=user, trigger=EnsembleRecipe.Trigger.MANUAL, reason=reason)
