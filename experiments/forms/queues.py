"""A site admin's share and quotas for one team on one queue (the queue page's form; the API
validates through it too)."""

from django import forms

from experiments.forms.checks import FormChecks
from experiments.models import Team


class QueuePolicyForm(FormChecks, forms.Form):
    team = forms.ModelChoiceField(queryset=Team.objects.order_by("name"))
    weight = forms.FloatField(min_value=0.01, max_value=1000, initial=1.0,
                              help_text="Its share of the queue's slots is weight / the sum of the weights of the "
                                        "teams using the queue (1 each by default: equal shares).")
    max_concurrent = forms.IntegerField(min_value=0, max_value=10_000, required=False,
                                        label="At most concurrent trials", help_text="Empty: no limit.")
    device_hours_per_month = forms.FloatField(min_value=0, max_value=10_000_000, required=False,
                                              label="At most device-hours a month",
                                              help_text="Counted from the trials finished this calendar month; "
                                                        "empty: no limit.")
