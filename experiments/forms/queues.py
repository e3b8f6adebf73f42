"""A site admin's share and quotas for one team on one queue (a row of the queue page's table; the
API validates through it too). The ranges are the service's (queue_policy_errors): one rule."""

from django import forms

from experiments.forms.checks import FormChecks
from experiments.models import Team
from experiments.services.fair_share import queue_policy_errors


class QueuePolicyForm(FormChecks, forms.Form):
    team = forms.ModelChoiceField(queryset=Team.objects.order_by("name"), widget=forms.HiddenInput)
    weight = forms.FloatField(initial=1.0, help_text="Its share of the queue's slots is weight / the sum of the "
                                                     "weights of the teams using the queue (1 each by default).")
    max_concurrent = forms.IntegerField(required=False, label="At most concurrent trials and jobs",
                                        help_text="Empty: no limit.")
    device_hours_per_month = forms.FloatField(required=False, label="At most device-hours a month",
                                              help_text="The device time of its trials and jobs (retrains, "
                                                        "re-runs, predictions, conversions) this calendar month; "
                                                        "empty: no limit.")

    def __init__(self, *args, queue: str, row_of: Team | None = None, **kwargs):
        """`row_of`: the team whose row of the page's table this form is, prefilled with its policy
        (a table row holds no <form>: its inputs name the row's form by id)."""
        if row_of is not None:
            kwargs.setdefault("auto_id", f"policy-{row_of.pk}-%s")
        super().__init__(*args, **kwargs)
        self.queue = queue
        if row_of is not None:
            self.row_id, self.row_name = f"policy-{row_of.pk}", row_of.name
            for name, field in self.fields.items():
                field.widget.attrs.update({"form": self.row_id, "aria-label": f"{self[name].label} of {row_of.name}"})

    def clean(self):
        data = super().clean()
        if not self.errors:
            values = {name: data.get(name) for name in ("weight", "max_concurrent", "device_hours_per_month")}
            for name, message in queue_policy_errors(queue=self.queue, **values).items():
                self.add_error(name if name in self.fields else None, message)
        return data
