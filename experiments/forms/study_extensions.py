"""The form to extend an ended study (services/study_extensions.py checks the rules; this one the types and bounds)."""

from django import forms
from django.core import validators

from experiments.forms.checks import FormChecks
from experiments.models import Study
from experiments.services.studies import LIMITS
from experiments.tuning.tuners import tuner_help


class StudyExtendForm(FormChecks, forms.Form):
    max_trials = forms.IntegerField(label="Max trials", help_text="In all, the trials so far included.")
    epochs = forms.IntegerField(label="Epochs per trial", help_text="Only raised: later trials train this many.")
    stop_device_hours = forms.FloatField(
        label="Device-hour budget", required=False,
        help_text="The study's device-hours in all, those spent so far included (empty: as it was).")
    tuner = forms.ChoiceField(choices=Study.Tuner.choices,
                              help_text="Every trial so far is told to it. " + tuner_help())

    def __init__(self, *args, study: Study | None = None, **kwargs):
        if study is not None and not args and "initial" not in kwargs:
            kwargs["initial"] = {"max_trials": study.max_trials * 2, "epochs": study.epochs, "tuner": study.tuner,
                                 "stop_device_hours": study.stop_device_hours}
        super().__init__(*args, **kwargs)
        for name in ("max_trials", "epochs"):
            low, high = LIMITS[name]
            self.fields[name].validators += [validators.MinValueValidator(low), validators.MaxValueValidator(high)]
            self.fields[name].widget.attrs.update(min=low, max=high)
