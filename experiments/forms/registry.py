"""The registry's forms: one set of checks and messages for the pages and the API (the API binds
these very forms through experiments.api.bodies)."""

from django import forms
from django.utils.text import slugify

from experiments.forms.checks import FormChecks
from experiments.forms.fields import no_control_characters
from experiments.models import TrainedModel
from experiments.tuning.bounds import MAX_ID

MAX_NAME = 80
MAX_ALIAS = 40
MAX_DESCRIPTION = 2000


def _slug(value: str, *, what: str, limit: int) -> str:
    value = (value or "").strip()
    if not value:
        raise forms.ValidationError(f"Give the {what}.")
    if len(value) > limit:
        raise forms.ValidationError(f"The {what} can have at most {limit} characters, not {len(value)}.")
    if slugify(value) != value:
        raise forms.ValidationError(f"The {what} {value!r} may hold only lower-case letters, the digits 0-9, '-' "
                                    "and '_' (it names a folder and a TF Serving model or label).")
    return value


def _number_field(label: str, what: str, **kwargs) -> forms.IntegerField:
    message = f"Give the {what} as a whole number (1, 2, ...)."
    return forms.IntegerField(label=label, min_value=1, max_value=MAX_ID, **kwargs, error_messages={
        "invalid": message, "min_value": message, "max_value": message})


class RegisterForm(FormChecks, forms.Form):
    """Register a finished model as the next version of a registered model, new or existing."""

    name = forms.CharField(label="Registered model", max_length=200, validators=[no_control_characters],
                           help_text="An existing registered model of the team, or a new name (lower-case letters, "
                                     "digits, '-' and '_'): a new one takes this model's task and input.")
    description = forms.CharField(label="Notes", required=False, max_length=MAX_DESCRIPTION,
                                  validators=[no_control_characters], widget=forms.Textarea(attrs={"rows": 2}))
    variant = _number_field("Quantized variant", "variant's id", required=False,
                            help_text="Register one of the model's made quantized variants instead of the float "
                                      "model (TF Serving serves a Keras variant's SavedModel).")

    def clean_name(self):
        return _slug(self.cleaned_data["name"], what="registered model's name", limit=MAX_NAME)


class _PicksModel(FormChecks, forms.Form):
    """A trained model of the team, by id (the API's bodies)."""

    model = _number_field("Model", "model's id", help_text="The trained model's (or ensemble's) id.")

    def __init__(self, *args, team, **kwargs):
        super().__init__(*args, **kwargs)
        self.team = team

    def clean_model(self) -> TrainedModel:
        pk = self.cleaned_data["model"]
        found = TrainedModel.objects.filter(team=self.team, pk=pk).first()
        if found is None:
            raise forms.ValidationError(f"Model {pk} was not found in this team.")
        return found


class RegistryCreateForm(_PicksModel, RegisterForm):
    """POST /api/v1/registry/: register `model` under `name`, making the registered model if new."""


class VersionForm(_PicksModel):
    """POST /api/v1/registry/<id>/versions/: `model` as the registered model's next version."""

    description = RegisterForm.base_fields["description"]
    variant = RegisterForm.base_fields["variant"]


class AliasForm(FormChecks, forms.Form):
    """Point an alias at a version (pages; the API takes the alias from its URL)."""

    alias = forms.CharField(label="Alias", max_length=200, validators=[no_control_characters],
                            help_text="production, staging or any name (lower-case letters, digits, '-' and '_').")
    version = _number_field("Version", "version")

    def clean_alias(self):
        return _slug(self.cleaned_data["alias"], what="alias", limit=MAX_ALIAS)


class AliasRemoveForm(FormChecks, forms.Form):
    alias = AliasForm.base_fields["alias"]

    clean_alias = AliasForm.clean_alias


class RollbackForm(FormChecks, forms.Form):
    """The page's one-click rollback: the move to undo."""

    move = _number_field("Move", "move")
