"""A personal API token: its name, team, role at most and lifetime."""

from django import forms

from experiments.forms.checks import FormChecks
from experiments.models import Membership
from experiments.services.api_tokens import MAX_DAYS


class ApiTokenForm(FormChecks, forms.Form):
    name = forms.CharField(max_length=100, strip=True, error_messages={
        "required": "Give the token a name, e.g. the machine or script that will use it."})
    team = forms.TypedChoiceField(coerce=int, label="Team", help_text="The one team this token acts in.")
    role = forms.ChoiceField(choices=Membership.Role.choices, label="Role at most",
                             help_text="It never acts with more than your own role in the team.")
    days = forms.IntegerField(required=False, min_value=1, max_value=MAX_DAYS, label="Expires after (days)",
                              help_text="Empty: never.")

    def __init__(self, *args, memberships, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].choices = [(m.team_id, m.team.name) for m in memberships]
