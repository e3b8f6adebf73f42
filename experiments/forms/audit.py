"""The audit log's filters: person, action and dates."""

from django import forms

from experiments.forms.checks import FormChecks
from experiments.selectors.audit import team_audit_actors, team_audit_events
from experiments.services.audit import VERB_LABELS


class AuditFilterForm(FormChecks, forms.Form):
    """The filters of the page and of GET /api/v1/audit/ (one validation, one set of messages)."""

    actor = forms.TypedChoiceField(coerce=int, required=False, empty_value=None, label="Person")
    action = forms.ChoiceField(required=False, label="Action",
                               choices=[("", "Any action"), *sorted(VERB_LABELS.items(), key=lambda kv: kv[1])])
    since = forms.DateField(required=False, label="From (UTC date)", widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, label="To (UTC date)", widget=forms.DateInput(attrs={"type": "date"}))

    def __init__(self, *args, team, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["actor"].choices = [("", "Anyone"), *team_audit_actors(team=team)]

    def clean(self):
        data = super().clean()
        if data.get("since") and data.get("until") and data["since"] > data["until"]:
            raise forms.ValidationError("The start date is after the end date.")
        return data

    def events(self, team):
        """The rows the valid filters select (all rows when the form is not bound)."""
        data = self.cleaned_data if self.is_bound else {}
        return team_audit_events(team=team, actor_id=data.get("actor"), verb=data.get("action") or "",
                                 since=data.get("since"), until=data.get("until"))
