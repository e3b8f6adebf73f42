"""Retraining or promoting a study's trials: one form for the study page, the trial page and the API."""

from django import forms

from experiments.forms.checks import FormChecks
from experiments.models import Study, TrainedModel
from experiments.services.trained_models import MAX_EPOCH_CAP, default_model_name


def default_epoch_cap(study: Study) -> int:
    """The retrain's best-epoch detection cap: room for 3x the search's epochs (at least 10)."""
    return min(MAX_EPOCH_CAP, max(10, 3 * study.epochs))


class ModelRequestForm(FormChecks, forms.Form):
    """Retrain (or promote) the top trials of a study, or one trial when `top_n` is hidden."""

    top_n = forms.IntegerField(label="How many of the best trials", initial=3, min_value=1, max_value=20)
    method = forms.ChoiceField(
        choices=[(m.value, m.label) for m in (TrainedModel.Method.RETRAIN, TrainedModel.Method.PROMOTE)],
        initial=TrainedModel.Method.RETRAIN, widget=forms.RadioSelect)
    epoch_source = forms.ChoiceField(label="Best epoch", choices=TrainedModel.EpochSource.choices,
                                     initial=TrainedModel.EpochSource.DETECT, widget=forms.RadioSelect,
                                     help_text="Only for retraining.")
    epoch_cap = forms.IntegerField(label="Epoch cap for best-epoch detection", initial=100, min_value=1,
                                   max_value=MAX_EPOCH_CAP)
    name = forms.SlugField(label="Model name", max_length=80, required=False,
                           help_text="Each model gets a name of its own: <study>-trial-<trial number> by default "
                                     "(Trial 3's is <study>-trial-3). A name given is used as is for one trial and "
                                     "as <name>-trial-<trial number> for several; making a name again counts its "
                                     "version up.")
    include_pruned = forms.BooleanField(label="Include pruned trials", required=False,
                                        help_text="Pruned trials stopped early, so their scores are short of a full "
                                                  "training; by default only completed trials are picked.")

    def __init__(self, *args, single_trial: bool = False, study: Study | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        if single_trial:
            del self.fields["top_n"], self.fields["include_pruned"]
        if study is not None:
            cap = default_epoch_cap(study)
            self.fields["epoch_cap"].initial = cap
            self.fields["epoch_cap"].help_text = (
                f"Defaults to 3 × the study's {study.epochs} epochs (at least 10, at most {MAX_EPOCH_CAP}): "
                f"{cap}. If the best epoch found is the cap, the model was still improving: raise it.")
            if "top_n" in self.fields:
                self.fields["name"].widget.attrs["placeholder"] = f"{default_model_name(study)}-trial-<number>"

