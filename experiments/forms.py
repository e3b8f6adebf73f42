import json

from django import forms
from django.conf import settings
from django.core import validators

from experiments.dataset_parsing import BUNDLED
from experiments.hypermodel_catalog import BUILTIN, hypermodel_entries
from experiments.models import Dataset, Study, TrainedModel
from experiments.search_space import SearchSpaceError, default_initial_random_trials, validate_search_space
from experiments.services.studies import LIMITS, study_settings_errors
from experiments.services.trained_models import MAX_EPOCH_CAP

METRICS_BY_TASK = {
    Dataset.Task.CLASSIFICATION: ["val_accuracy", "val_loss", "accuracy", "loss"],
    Dataset.Task.REGRESSION: ["val_loss", "val_mae", "loss", "mae"],
}


def infer_direction(metric: str) -> str:
    maximised = any(k in metric for k in ("acc", "auc", "precision", "recall"))
    return Study.Direction.MAX if maximised else Study.Direction.MIN


def _fraction_field(initial: float) -> forms.FloatField:
    return forms.FloatField(initial=initial, min_value=0.01, max_value=0.9,
                            help_text="Share of the rows, e.g. 0.15.")


class BundledDatasetForm(forms.Form):
    bundled_name = forms.ChoiceField(label="Bundled dataset", choices=[(k, f"{k} — {v}") for k, v in BUNDLED.items()])
    name = forms.CharField(max_length=100, required=False, help_text="Defaults to the dataset's name.")
    val_fraction = _fraction_field(0.15)
    test_fraction = _fraction_field(0.15)
    seed = forms.IntegerField(initial=0, label="Split seed")


class DatasetUploadForm(forms.Form):
    name = forms.CharField(max_length=100)
    file = forms.FileField(help_text="CSV with a header row, or NPZ with arrays x and y.")
    target_column = forms.CharField(max_length=200, required=False, help_text="CSV only: the column to predict.")
    task = forms.ChoiceField(choices=[("auto", "Detect"), ("classification", "Classification"),
                                      ("regression", "Regression")], initial="auto")
    val_fraction = _fraction_field(0.15)
    test_fraction = _fraction_field(0.15)
    seed = forms.IntegerField(initial=0, label="Split seed")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["file"].help_text += f" At most {settings.UPLOAD_MAX_MB} MB."


class StudyForm(forms.ModelForm):
    search_space = forms.CharField(widget=forms.Textarea(attrs={"rows": 8}), label="Search space (JSON)")
    objective_direction = forms.ChoiceField(
        choices=[("auto", "Infer from the metric")] + list(Study.Direction.choices), initial="auto",
        label="Direction",
    )

    class Meta:
        model = Study
        fields = ["name", "dataset", "hypermodel", "search_space", "tuner", "objective_metric",
                  "objective_direction", "max_trials", "executions_per_trial", "epochs", "batch_size",
                  "patience", "seed", "queue", "parallelism", "initial_random_trials"]
        labels = {"name": "Study name", "objective_metric": "Objective metric", "max_trials": "Max trials",
                  "executions_per_trial": "Executions per trial", "patience": "Early-stopping patience"}
        help_texts = {"objective_metric": "e.g. val_accuracy or val_loss (never a test metric).",
                      "parallelism": "Trials in flight at once across the workers of the queue."}

    def __init__(self, *args, team, **kwargs):
        super().__init__(*args, **kwargs)
        self.search_space_errors: dict[str, list[str]] = {}
        self.fields["dataset"].queryset = Dataset.objects.filter(team=team)
        self.fields["hypermodel"] = forms.ChoiceField(
            choices=[(name, f"{name} — {e.description}") for name, e in hypermodel_entries().items()]
        )
        for name, (low, high) in LIMITS.items():
            if name not in self.fields:
                continue
            self.fields[name].validators += [validators.MinValueValidator(low),
                                             validators.MaxValueValidator(high)]
            self.fields[name].widget.attrs.update(min=low, max=high)
        if not self.is_bound and "search_space" not in self.initial:
            self.initial["search_space"] = json.dumps(BUILTIN["dense"].default_space, indent=1)
        self.fields["initial_random_trials"].label = "Initial random trials (Bayesian)"

    @property
    def initial_random_default(self) -> int:
        """What an empty 'initial random trials' means for the space on the page."""
        text = self.data.get("search_space") if self.is_bound else self.initial.get("search_space")
        try:
            rows = json.loads(text) if isinstance(text, str) else (text or [])
        except json.JSONDecodeError:
            rows = []
        return default_initial_random_trials(rows if isinstance(rows, list) else [])

    def clean_name(self):
        name = self.cleaned_data["name"].strip()
        if not name:
            raise forms.ValidationError("Give the study a name.")
        return name

    def clean_search_space(self):
        try:
            rows = json.loads(self.cleaned_data["search_space"])
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"The search space is not valid JSON: {exc}.") from None
        try:
            return validate_search_space(rows)
        except SearchSpaceError as exc:
            self.search_space_errors = {str(i): msgs for i, msgs in exc.row_errors.items()}
            raise forms.ValidationError(exc.general or ["Fix the hyperparameters marked below."]) from None

    def clean(self):
        data = super().clean()
        metric = (data.get("objective_metric") or "").strip()
        dataset, hypermodel = data.get("dataset"), data.get("hypermodel")
        if metric and dataset and hypermodel in BUILTIN:
            allowed = METRICS_BY_TASK[dataset.task]
            if metric not in allowed:
                self.add_error("objective_metric", f"The {hypermodel} hypermodel on a {dataset.task} dataset "
                               f"reports {', '.join(allowed)}; choose one of them.")
        if metric.startswith("test"):
            self.add_error("objective_metric", "The test split is never used for selection.")
        if data.get("objective_direction") == "auto" and metric:
            data["objective_direction"] = infer_direction(metric)
        # The rules live in the service; the form only shows them beside their fields.
        settings = {name: data.get(name) for name in self.Meta.fields if name in data}
        for name, message in study_settings_errors(**settings).items():
            if name in self.fields and name not in self.errors:
                self.add_error(name, message)
        return data


class StudyBudgetForm(forms.ModelForm):
    """What may change while a study runs."""

    class Meta:
        model = Study
        fields = ["max_trials", "parallelism"]
        labels = {"max_trials": "Max trials"}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in self.Meta.fields:
            low, high = LIMITS[name]
            self.fields[name].validators += [validators.MinValueValidator(low), validators.MaxValueValidator(high)]
            self.fields[name].widget.attrs.update(min=low, max=high)


class ModelRequestForm(forms.Form):
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
                           help_text="Versions count up per name; defaults to the study's name.")

    def __init__(self, *args, single_trial: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        if single_trial:
            del self.fields["top_n"]
