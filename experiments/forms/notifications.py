"""A team webhook: where it posts, which events, and its signing secret (the services' checks,
shown under their fields)."""

from django import forms

from experiments.forms.checks import FormChecks
from experiments.models import SUBSCRIBABLE_EVENTS
from experiments.security.webhook_signing import MIN_SECRET_LENGTH
from experiments.services.webhooks import (
    WebhookError,
    check_webhook_events,
    check_webhook_name,
    check_webhook_secret,
    check_webhook_url,
)


class WebhookForm(FormChecks, forms.Form):
    name = forms.CharField(max_length=100, help_text="Where it posts, e.g. “#ml-alerts on Slack”.")
    url = forms.CharField(label="URL", max_length=500,
                          help_text="http:// or https://: a Slack or Mattermost incoming webhook, or your own.")
    events = forms.MultipleChoiceField(choices=SUBSCRIBABLE_EVENTS, widget=forms.CheckboxSelectMultiple,
                                       required=False, label="Events")
    active = forms.BooleanField(required=False, initial=True, label="Active (send events)")
    secret = forms.CharField(required=False, max_length=128, widget=forms.PasswordInput(render_value=False),
                             help_text=f"Empty: one is generated (or, when editing, kept). Your own: at least "
                                       f"{MIN_SECRET_LENGTH} characters.")

    def clean_name(self):
        return self._check("name", check_webhook_name)

    def clean_url(self):
        return self._check("url", check_webhook_url)

    def clean_events(self):
        return self._check("events", check_webhook_events)

    def clean_secret(self):
        return self._check("secret", check_webhook_secret)

    def _check(self, field: str, check):
        try:
            return check(self.cleaned_data[field])
        except WebhookError as exc:
            raise forms.ValidationError(str(exc)) from None
