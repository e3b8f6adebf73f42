"""An ensemble of chosen members: the ensemble page and POST /api/v1/ensembles/ bind the same form."""

from django import forms

from experiments.forms.checks import FormChecks
from experiments.forms.fields import no_control_characters, seed_field, whole_number_field
from experiments.models import TrainedModel
from experiments.services.ensembles import MAX_ROUNDS, ensemble_members_resolve
from experiments.services.ensembles import METHODS as ENSEMBLE_METHODS
from experiments.services.trained_models import MAX_MODEL_NAME, ModelRequestError, check_model_name


class MemberKeysField(forms.Field):
    """A list of "model:<id>" / "trial:<id>" keys (checkboxes on the page, a JSON list in the API)."""

    widget = forms.SelectMultiple
    takes_list = True  # for experiments.api.bodies

    def to_python(self, value):
        if value in self.empty_values:
            return []
        values = value if isinstance(value, list | tuple) else [value]
        if not all(isinstance(v, str) for v in values):
            raise forms.ValidationError('Give the members as a list like ["model:12", "trial:34"].')
        return list(values)


class EnsembleForm(FormChecks, forms.Form):
    """The ensemble page's fields and POST /api/v1/ensembles/'s: one set of checks and messages."""

    members = MemberKeysField(required=False)
    method = forms.ChoiceField(choices=[(m.value, m.label.removeprefix("Ensemble: ")) for m in ENSEMBLE_METHODS],
                               initial=TrainedModel.Method.NELDER_MEAD)
    greedy_rounds = whole_number_field("Greedy rounds", low=1, high=MAX_ROUNDS, required=False, initial=50,
                                       help_text="Greedy selection only: how many picks (with replacement).")
    seed = seed_field(required=False, help_text="Breaks ties in greedy selection; shuffles stacking's CV folds.")
    name = forms.CharField(required=False, max_length=MAX_MODEL_NAME, validators=[no_control_characters],
                           help_text="Lower-case letters, digits, '-' and '_'; defaults to "
                                     "ensemble-<method>-<dataset>.")

    def __init__(self, *args, team, **kwargs):
        super().__init__(*args, **kwargs)
        self.team = team

    def clean_members(self):
        try:
            return ensemble_members_resolve(team=self.team, keys=self.cleaned_data["members"])
        except ModelRequestError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_name(self):
        try:
            return check_model_name(self.cleaned_data["name"].strip()) if self.cleaned_data["name"].strip() else ""
        except ModelRequestError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean(self):
        data = super().clean()
        if data.get("greedy_rounds") is None:
            data["greedy_rounds"] = self.fields["greedy_rounds"].initial
        if data.get("seed") is None:
            data["seed"] = 0
        return data
