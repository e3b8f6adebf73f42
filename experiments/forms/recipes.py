"""Ensemble recipes' forms: one set of checks and messages for the pages and the API (the API
binds these very forms through experiments.api.bodies). A refused recipe saves nothing."""

import io

import numpy as np
from django import forms
from django.core.exceptions import ValidationError
from django.utils.text import slugify

from experiments.ensembling.diversity import correlation_pick
from experiments.forms.checks import FormChecks
from experiments.forms.fields import no_control_characters, whole_number_field
from experiments.models import Dataset, EnsembleRecipe, Study
from experiments.selectors.prediction_cache import cached_predictions_read
from experiments.selectors.recipes import Rule, recipe_candidates, recipe_sources
from experiments.tuning.bounds import parse_id

MAX_NAME = 80
MAX_ALIAS = 40
MAX_TAG = 40
MAX_TOP_K = 50
MAX_ROUNDS = 1000
# The choice sets by name, for the API schema's enums (settings' ENUM_NAME_OVERRIDES).
RecipeMethod, RecipeTrigger = EnsembleRecipe.Method, EnsembleRecipe.Trigger
RecipeMembersAs, RecipeGroupBy, Direction = EnsembleRecipe.MembersAs, EnsembleRecipe.GroupBy, Study.Direction
RULE_FIELDS = ("source_tag", "metric", "direction", "top_k", "per_group_max", "group_by", "include_pruned",
               "members_as")


def recipe_slug(value: str, *, what: str, limit: int, required: bool = True) -> str:
    value = (value or "").strip()
    if not value:
        if required:
            raise forms.ValidationError(f"Give the {what}.")
        return ""
    if len(value) > limit:
        raise forms.ValidationError(f"The {what} can have at most {limit} characters, not {len(value)}.")
    if slugify(value) != value:
        raise forms.ValidationError(f"The {what} {value!r} may hold only lower-case letters, digits, '-' and '_'.")
    return value


def _unique_name(team, name: str, exclude_id: int | None = None) -> str:
    taken = EnsembleRecipe.objects.filter(team=team, name=name)
    if exclude_id is not None:
        taken = taken.exclude(pk=exclude_id)
    if taken.exists():
        raise forms.ValidationError(f"The team already has a recipe named {name!r}; pick another name.")
    return name


def _choices(enum) -> list[tuple[str, str]]:
    return [(value, label) for value, label in enum.choices]


class _TeamChoice(forms.ModelChoiceField):
    """An id screened by parse_id before the lookup: SQLite cannot bind a 20-digit number (an
    OverflowError, a 500 in make run), so an id out of range is "not found" like any other."""

    def to_python(self, value):
        if value not in self.empty_values and parse_id(value) is None:
            raise ValidationError(self.error_messages["invalid_choice"], code="invalid_choice",
                                  params={"value": value})
        return super().to_python(value)


class _TeamChoices(forms.ModelMultipleChoiceField):
    """The same screening for a list of ids."""

    def _check_values(self, value):
        for pk in value:
            if parse_id(pk) is None:
                raise ValidationError(self.error_messages["invalid_pk_value"], code="invalid_pk_value",
                                      params={"pk": pk})
        return super()._check_values(value)


class RecipeForm(FormChecks, forms.Form):
    """Create or edit a recipe (pages: /recipes/new/, /recipes/<id>/edit/; API: POST, PUT, PATCH)."""

    name = forms.CharField(max_length=200, validators=[no_control_characters],
                           help_text="Lower-case letters, digits, '-' and '_'; unique in the team.")
    description = forms.CharField(required=False, max_length=2000, validators=[no_control_characters],
                                  widget=forms.Textarea(attrs={"rows": 2}))
    dataset = _TeamChoice(queryset=Dataset.objects.none(), error_messages={
        "required": "Pick the dataset whose studies the recipe draws from.",
        "invalid_choice": "That dataset was not found in this team."})
    source_studies = _TeamChoices(
        label="Studies", queryset=Study.objects.none(), required=False,
        help_text="Source studies of the dataset (and/or a tag below).",
        error_messages={"invalid_choice": "Study %(value)s was not found in this team.",
                        "invalid_pk_value": "Study %(pk)s was not found in this team."})
    source_tag = forms.CharField(label="Studies tagged", required=False, max_length=200,
                                 validators=[no_control_characters],
                                 help_text="Every study of the dataset carrying this tag (set on a study's page).")
    metric = forms.CharField(max_length=50, initial="val_loss", validators=[no_control_characters],
                             help_text="The trial metric ranking candidates, e.g. val_loss or val_accuracy.")
    direction = forms.ChoiceField(choices=_choices(Study.Direction), initial=Study.Direction.MIN)
    top_k = whole_number_field("Top K", low=1, high=MAX_TOP_K, initial=3,
                               help_text="The best K trials of each source study are candidates.")
    per_group_max = whole_number_field("At most M per group", low=1, high=MAX_TOP_K, initial=1,
                                       help_text="Members from one hypermodel (or study) at most.")
    group_by = forms.ChoiceField(choices=_choices(EnsembleRecipe.GroupBy), initial=EnsembleRecipe.GroupBy.HYPERMODEL)
    include_pruned = forms.BooleanField(required=False, label="Include pruned trials")
    correlation_cap = forms.FloatField(
        required=False, label="Correlation cap",
        help_text="Optional, above 0 and at most 1: a candidate whose validation predictions correlate with a "
                  "better member's above this is left out.",
        error_messages={"invalid": "The correlation cap must be a number above 0 and at most 1."})
    members_as = forms.ChoiceField(choices=_choices(EnsembleRecipe.MembersAs),
                                   initial=EnsembleRecipe.MembersAs.RETRAINED)
    method = forms.ChoiceField(choices=_choices(EnsembleRecipe.Method), initial=EnsembleRecipe.Method.NELDER_MEAD)
    greedy_rounds = whole_number_field("Greedy rounds", low=1, high=MAX_ROUNDS, initial=50,
                                       help_text="Greedy selection only: how many picks (with replacement).")
    trigger = forms.ChoiceField(choices=_choices(EnsembleRecipe.Trigger), initial=EnsembleRecipe.Trigger.MANUAL)
    register_as = forms.CharField(label="Register as", required=False, max_length=200,
                                  validators=[no_control_characters],
                                  help_text="Optional: each run's ensemble becomes a version of this registered "
                                            "model.")
    alias = forms.CharField(required=False, max_length=200, validators=[no_control_characters],
                            help_text="Optional (needs Register as), e.g. production: moved only when the new "
                                      "version beats the alias's on validation.")

    def __init__(self, *args, team, instance: EnsembleRecipe | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.team, self.instance = team, instance
        self.fields["dataset"].queryset = Dataset.objects.filter(team=team).order_by("name")
        self.fields["source_studies"].queryset = (Study.objects.filter(team=team).select_related("dataset")
                                                  .order_by("name"))
        # The list holds every study of the team: say each one's dataset and hypermodel beside its name.
        self.fields["source_studies"].label_from_instance = lambda s: f"{s.name} · {s.dataset.name} · {s.hypermodel}"
        self.warnings: list[str] = []

    def clean_name(self):
        name = recipe_slug(self.cleaned_data["name"], what="recipe's name", limit=MAX_NAME)
        return _unique_name(self.team, name, self.instance.pk if self.instance else None)

    def clean_source_tag(self):
        return self.cleaned_data["source_tag"].strip().lower()[:MAX_TAG + 1] if self.cleaned_data["source_tag"] else ""

    def clean_metric(self):
        metric = self.cleaned_data["metric"].strip()
        if not metric:
            raise forms.ValidationError("Give the metric that ranks the candidates (e.g. val_loss).")
        return metric

    def clean_correlation_cap(self):
        cap = self.cleaned_data.get("correlation_cap")
        if cap is not None and not 0 < cap <= 1:
            raise forms.ValidationError(f"No pair of models satisfies a correlation cap of {cap:g}: the cap must be "
                                        "above 0 and at most 1 (1 keeps every candidate).")
        return cap

    def clean_register_as(self):
        return recipe_slug(self.cleaned_data["register_as"], what="registered model's name", limit=MAX_NAME,
                           required=False)

    def clean_alias(self):
        return recipe_slug(self.cleaned_data["alias"], what="alias", limit=MAX_ALIAS, required=False)

    def clean(self):
        data = super().clean()
        if data.get("alias") and not data.get("register_as") and "register_as" not in self.errors:
            self.add_error("alias", "An alias needs Register as: name the registered model whose alias moves.")
        if len(data.get("source_tag") or "") > MAX_TAG:
            self.add_error("source_tag", f"A tag has at most {MAX_TAG} characters.")
        dataset, studies = data.get("dataset"), list(data.get("source_studies") or [])
        if dataset is None or self.errors.get("source_studies") or self.errors.get("source_tag"):
            return data
        self._check_sources(dataset, studies, data.get("source_tag") or "",
                            waits=data.get("trigger") in (EnsembleRecipe.Trigger.STUDY_COMPLETED,
                                                          EnsembleRecipe.Trigger.NEW_CANDIDATE))
        if not self.errors and data.get("correlation_cap") is not None:
            self._check_cap(self.rule(), data["correlation_cap"])
        return data

    def _check_sources(self, dataset: Dataset, studies: list[Study], tag: str, *, waits: bool) -> None:
        """`waits`: a recipe run by study events may name a tag no study carries yet (the studies
        tagged later are its sources); one run on demand would have nothing to run."""
        if not studies and not tag:
            self.add_error("source_studies", "Give the recipe's sources: one or more studies of the dataset, or a "
                                             "tag (every study of the dataset carrying it).")
            return
        datasets = {study.dataset_id for study in studies}
        if len(datasets) > 1:
            names = ", ".join(sorted({study.dataset.name for study in studies}))
            self.add_error("source_studies", f"The studies are of different datasets ({names}): an ensemble's "
                                             "members must all be trained on one dataset.")
            return
        stray = [study for study in studies if study.dataset_id != dataset.id]
        if stray:
            self.add_error("source_studies", f"Study {stray[0].name!r} is of dataset {stray[0].dataset.name!r}, not "
                                             f"the recipe's {dataset.name!r}.")
            return
        if tag and not waits and not recipe_sources(Rule(team=self.team, dataset_id=dataset.id, source_tag=tag)):
            self.add_error("source_tag", f"No study of {dataset.name} carries the tag {tag!r}: tag studies on their "
                                         "pages, pick studies, or let the recipe wait for tagged studies (trigger "
                                         "on a source study completing).")

    def _check_cap(self, rule: Rule, cap: float) -> None:
        """Refuse a cap that leaves fewer than two of today's picks, when their predictions are known."""
        keys, predictions = [], {}
        for candidate in recipe_candidates(rule):
            if not candidate.picked:
                continue
            key = f"trial:{candidate.trial_id}"
            keys.append(key)
            stored = cached_predictions_read(key=f"{key}:val")
            if stored is not None:
                with np.load(io.BytesIO(stored)) as npz:
                    predictions[key] = npz["predictions"]
        if len(predictions) < 2:
            return  # nothing known to be too alike: the run applies the cap
        kept, dropped = correlation_pick(keys, predictions, cap)
        if len(kept) < 2:
            closest = min(r for _, r in dropped.values()) if dropped else 1.0
            self.add_error("correlation_cap", f"Nothing satisfies a correlation cap of {cap:g}: today's candidates' "
                                              f"validation predictions correlate at {closest:g} or more, so only "
                                              "one member would remain. Raise the cap or add other studies.")

    def rule(self) -> Rule | None:
        """The candidate rule of the fields filled in so far (the preview's); None without a dataset."""
        data = getattr(self, "cleaned_data", {})
        dataset = data.get("dataset")
        if dataset is None:
            return None
        values = {name: data.get(name) for name in RULE_FIELDS}
        defaults = {name: self.fields[name].initial for name in RULE_FIELDS}
        values = {name: defaults[name] if value in (None, "") and defaults[name] is not None else value
                  for name, value in values.items()}
        values["include_pruned"] = bool(values["include_pruned"])
        values["source_tag"] = values["source_tag"] or ""
        return Rule(team=self.team, dataset_id=dataset.id,
                    study_ids=sorted(s.id for s in data.get("source_studies") or []), **values)


def recipe_initial(recipe: EnsembleRecipe) -> dict:
    """A saved recipe as the form's data (the edit page's initial values, the API's PATCH base)."""
    values = {name: getattr(recipe, name) for name in (
        "name", "description", *RULE_FIELDS, "correlation_cap", "method", "greedy_rounds", "trigger", "register_as",
        "alias")}
    return {**values, "dataset": recipe.dataset_id,
            "source_studies": list(recipe.source_studies.values_list("id", flat=True))}


class RecipeCloneForm(FormChecks, forms.Form):
    """A recipe's copy under a new name (same rule as a new recipe's name)."""

    name = RecipeForm.base_fields["name"]

    def __init__(self, *args, team, **kwargs):
        super().__init__(*args, **kwargs)
        self.team = team

    def clean_name(self):
        name = recipe_slug(self.cleaned_data["name"], what="recipe's name", limit=MAX_NAME)
        return _unique_name(self.team, name)


# "combined by …": the method's label reads "Weights by Nelder–Mead", which lower-cased doubles the "by".
METHOD_WORDS = {
    EnsembleRecipe.Method.MEAN: "the mean",
    EnsembleRecipe.Method.NELDER_MEAD: "weights fitted by Nelder–Mead",
    EnsembleRecipe.Method.GREEDY: "greedy selection with replacement",
    EnsembleRecipe.Method.STACKING: "stacking (a regularised meta-learner)",
}


def rule_in_words(recipe: EnsembleRecipe) -> str:
    studies = ", ".join(recipe.source_studies.values_list("name", flat=True))
    sources = " and ".join(filter(None, [f"studies {studies}" if studies else "",
                                         f"every study tagged {recipe.source_tag!r}" if recipe.source_tag else ""]))
    group = "hypermodel" if recipe.group_by == EnsembleRecipe.GroupBy.HYPERMODEL else "study"
    best = "lowest" if recipe.direction == Study.Direction.MIN else "highest"
    trials = "trial" if recipe.top_k == 1 else f"{recipe.top_k} trials"
    words = (f"From {sources} of {recipe.dataset.name}: the top {trials} of each by {recipe.metric} "
             f"({best} first), at most {recipe.per_group_max} per {group}, pruned trials "
             f"{'in' if recipe.include_pruned else 'out'}")
    if recipe.correlation_cap is not None:
        words += f", no two members correlating above {recipe.correlation_cap:g} on validation"
    words += f"; members as {recipe.get_members_as_display().lower()}; combined by {METHOD_WORDS[recipe.method]}"
    if recipe.method == EnsembleRecipe.Method.GREEDY:
        words += f" ({recipe.greedy_rounds} rounds)"
    words += f"; runs {recipe.get_trigger_display().lower()}"
    if recipe.register_as:
        words += f"; registered as {recipe.register_as}"
        if recipe.alias:
            words += f", moving @{recipe.alias} only when it beats the alias's version on validation"
    return words + "."

