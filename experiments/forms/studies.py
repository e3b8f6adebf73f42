"""A study: the new-study page (and a clone's), POST /api/v1/studies/, and the budget a running
study may change."""

import json

from django import forms
from django.core import validators

from experiments.forms.checks import FormChecks
from experiments.forms.fields import no_control_characters
from experiments.models import Dataset, Study
from experiments.presentation.ranking_rule import metric_direction
from experiments.services.studies import COMPUTE_DEFAULTS, LIMITS, study_settings_errors
from experiments.services.warm_starts import (
    DEFAULT_TOP_K,
    MAX_TOP_K,
    WarmStartError,
    seed_count_error,
    warm_start_seeds,
)
from experiments.tuning.bounds import InputError, control_character_problem, load_json, parse_id
from experiments.tuning.compute_options import BACKEND_NAMES, BACKENDS
from experiments.tuning.hypermodel_catalog import BUILTIN, hypermodel_entries, hypermodels_for_kind
from experiments.tuning.objectives import COST_METRICS, ObjectiveError, cost_help, parse_constraints, parse_objectives
from experiments.tuning.pruning_options import APPLIES as PRUNING_APPLIES
from experiments.tuning.pruning_options import EXPLAINED as PRUNERS_EXPLAINED
from experiments.tuning.pruning_options import LIMITS as PRUNING_LIMITS
from experiments.tuning.pruning_options import MODEL_FIELDS as PRUNING_FIELDS
from experiments.tuning.pruning_options import SETTINGS as PRUNING_SETTINGS
from experiments.tuning.pruning_options import defaults_for
from experiments.tuning.pruning_options import model_field as pruning_field
from experiments.tuning.reproducibility import fresh_seed
from experiments.tuning.search_space import SearchSpaceError, validate_search_space
from experiments.tuning.space_values import default_initial_random_trials, fixed_type_errors
from experiments.tuning.stopping_rules import HELP_TEXTS as STOPPING_HELP
from experiments.tuning.stopping_rules import LABELS as STOPPING_LABELS
from experiments.tuning.stopping_rules import MODEL_FIELDS as STOPPING_FIELDS
from experiments.tuning.stopping_rules import NOT_A_NUMBER
from experiments.tuning.tuners import tuner_help

METRICS_BY_TASK = {
    Dataset.Task.CLASSIFICATION: ["val_accuracy", "val_loss", "accuracy", "loss"],
    Dataset.Task.REGRESSION: ["val_loss", "val_mae", "loss", "mae"],
}


def _int_or_none(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _percentile(value) -> None:
    if value is not None and not 0 < value < 100:
        raise forms.ValidationError("Must be a number above 0 and below 100: the share of trials kept at each epoch "
                                    "(25 keeps the best quarter).")


def infer_direction(metric: str) -> str:
    return Study.Direction.MAX if metric_direction(metric) == "max" else Study.Direction.MIN

COST_HELP = cost_help()


class SeedStudiesField(forms.ModelMultipleChoiceField):
    """The chosen studies as a list, in the order they were sent: their seeds run in that order."""

    def label_from_instance(self, obj) -> str:
        return f"{obj.name} ({obj.hypermodel} on {obj.dataset.name})"

    def clean(self, value):
        by_pk = {str(study.pk): study for study in super().clean(value)}
        return [by_pk[key] for key in dict.fromkeys(str(v) for v in value or []) if key in by_pk]


PRIORITY_HELP = ("Among the team's studies waiting for a slot of the queue, high goes first and low last; "
                 "teams share the queue's slots fairly whatever their studies' priorities.")


def optional_priority(form) -> None:
    """Left out (an older client, a study file), priority is the study's own or normal."""
    field = form.fields["priority"]
    field.required = False
    field.empty_value = getattr(form.instance, "priority", None) or Study.Priority.NORMAL


class StudyForm(FormChecks, forms.ModelForm):
    search_space = forms.CharField(widget=forms.Textarea(attrs={"rows": 8}), label="Search space (JSON)")
    objective_direction = forms.ChoiceField(
        choices=[("auto", "Infer from the metric")] + list(Study.Direction.choices), initial="auto",
        label="Direction",
    )
    seed_from = SeedStudiesField(
        queryset=Study.objects.none(), required=False, label="Warm start from",
        help_text="The best configurations of these studies run first, in order; then the tuner continues and "
                  "learns from their results. Hyperparameters of this search space that a configuration lacks take "
                  "the space's default; they count towards max trials.")
    top_k = forms.IntegerField(label="Best configurations per study", initial=DEFAULT_TOP_K, min_value=1,
                               max_value=MAX_TOP_K, required=False)
    extra_objectives = forms.CharField(
        required=False, label="More objectives", widget=forms.Textarea(attrs={"rows": 2, "placeholder": "params min"}),
        help_text="Up to two more metrics to optimise at once, one per line with min or max (e.g. \"params min\", "
                  "\"latency_ms min\"): the result is then a Pareto front to pick from. " + COST_HELP)
    constraints = forms.CharField(
        required=False, label="Constraints",
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "params <= 100000"}),
        help_text="One per line: a metric, <= or >=, and a number (e.g. \"params <= 100000\", \"latency_ms <= 5\"). "
                  "A trial that breaks one is infeasible: never best, never on the front, and the tuner learns to "
                  "avoid it.")

    class Meta:
        model = Study
        fields = ["name", "dataset", "hypermodel", "search_space", "tuner", "objective_metric",
                  "objective_direction", "max_trials", "executions_per_trial", "epochs", "batch_size",
                  "patience", "seed", "queue", "backend", "parallelism", "priority", "initial_random_trials",
                  "precision", "jit_compile", "steps_per_execution", "devices_per_trial", *PRUNING_FIELDS,
                  *STOPPING_FIELDS]
        labels = {"name": "Study name", "objective_metric": "Objective metric", "max_trials": "Max trials",
                  "executions_per_trial": "Executions per trial", "patience": "Early-stopping patience",
                  "batch_size": "Batch size (per replica)", "queue": "Accelerator queue", "backend": "Keras backend",
                  "jit_compile": "XLA compilation (jit_compile)", "steps_per_execution": "Steps per execution",
                  "devices_per_trial": "Devices per trial", "pruner": "Pruner",
                  "pruning_startup_trials": "Startup trials", "pruning_warmup_epochs": "Warm-up epochs",
                  "pruning_min_trials": "Minimum trials at an epoch", "pruning_percentile": "Percentile kept",
                  "pruning_min_epochs": "Min epochs (first rung)", "pruning_reduction_factor": "Reduction factor",
                  **STOPPING_LABELS}
        help_texts = {"objective_metric": "What the tuner optimises: a metric the hypermodel reports on this "
                                          "dataset's task (never a test metric).",
                      "backend": " ".join(f"{BACKEND_NAMES[name]}: {text}." for name, text in BACKENDS.items())
                                 + " Each runs on workers started for it (docs/how-to/gpus-and-tpus.md).",
                      "tuner": tuner_help(),
                      "parallelism": "Trials in flight at once across the workers of the queue.",
                      "priority": PRIORITY_HELP,
                      "batch_size": "Rows per device per step: with N devices per trial a step sees N × this "
                                    "(the global batch).",
                      "precision": "Mixed precision computes in 16 bits and keeps weights and outputs in float32.",
                      "steps_per_execution": "Batches run per call into TensorFlow: above 1 cuts per-step "
                                             "overhead on small models and TPUs; callbacks see every epoch.",
                      "devices_per_trial": "1, or N accelerators of one host with MirroredStrategy (GPU/CPU "
                                           "queues), or the whole TPU with TPUStrategy on the TPU queue.",
                      "pruning_startup_trials": "No trial is pruned until this many trials completed (by default 5 for "
                                                "median and percentile, 0 for successive halving and Pareto).",
                      "pruning_warmup_epochs": "No trial is pruned before it trained more epochs than this.",
                      "pruning_min_trials": "A trial is judged at an epoch only when at least this many finished "
                                            "trials reached it.",
                      "pruning_percentile": "The share of trials kept at each epoch: 25 keeps the best quarter.",
                      "pruning_min_epochs": "Successive halving judges at epochs m, m·r, m·r², …; this is m.",
                      "pruning_reduction_factor": "r: at each rung only the best 1/r of the trials go on.",
                      **STOPPING_HELP}

    def __init__(self, *args, team, refuse_unused: bool = False, **kwargs):
        """`refuse_unused`: a bad value of a setting the chosen pruner does not read is refused
        (the API) instead of ignored (the page, whose hidden fields may keep stale values)."""
        super().__init__(*args, **kwargs)
        self.refuse_unused = refuse_unused
        self.search_space_errors: dict[str, list[str]] = {}
        self.team = team
        self.warm_start_notes: list[str] = []
        optional_priority(self)
        self.fields["dataset"].queryset = Dataset.objects.filter(team=team)
        self.fields["seed_from"].queryset = Study.objects.filter(team=team).select_related("dataset")
        # Options are names (a paragraph in a dropdown is cut off); the page shows the chosen
        # one's description beside the choice and study_form.js keeps it in step.
        entries = hypermodel_entries()
        self.fields["hypermodel"] = forms.ChoiceField(
            choices=[(name, name) for name in entries],
            widget=forms.Select(attrs={"aria-describedby": "hypermodel-description"}),
        )
        self.hypermodel_descriptions = {name: e.description for name, e in entries.items()}
        # The page greys out the hypermodels that do not fit the chosen dataset's kind, with why.
        self.dataset_kinds = dict(self.fields["dataset"].queryset.values_list("id", "kind"))
        self.hypermodel_kinds = {name: list(e.kinds) for name, e in hypermodel_entries().items()}
        if not self.is_bound and "hypermodel" not in self.initial:
            kind = self.dataset_kinds.get(_int_or_none(self.initial.get("dataset")), "tabular")
            # A hypermodel made for this kind first (dense also takes flattened images).
            usable = sorted((entry for entry, why in hypermodels_for_kind(kind) if why is None),
                            key=lambda entry: entry.kinds[0] != kind)
            self.initial["hypermodel"] = usable[0].name if usable else "dense"
        for name, (low, high) in LIMITS.items():
            if name not in self.fields:
                continue
            self.fields[name].validators += [validators.MinValueValidator(low),
                                             validators.MaxValueValidator(high)]
            self.fields[name].widget.attrs.update(min=low, max=high)
        # The pruning settings' ranges at the field too, so a bad value is the field's error (the
        # service checks them again, with pruning_errors' words).
        for name, (low, high) in PRUNING_LIMITS.items():
            message = f"Must be a whole number from {low:,} to {high:,}."
            self.fields[pruning_field(name)].validators += [validators.MinValueValidator(low, message),
                                                            validators.MaxValueValidator(high, message)]
        self.fields[pruning_field("percentile")].validators.append(_percentile)
        if not self.is_bound and "search_space" not in self.initial:
            entry = BUILTIN.get(self.initial.get("hypermodel"), BUILTIN["dense"])
            self.initial["search_space"] = json.dumps(entry.default_space, indent=1)
        self._objective_metric_widget()
        self.fields["initial_random_trials"].label = "Initial random trials (Bayesian)"
        for name in ("backend", "precision", "jit_compile", "steps_per_execution", "devices_per_trial",
                     *PRUNING_FIELDS, *STOPPING_FIELDS):
            # Absent: the default (TensorFlow, float32, auto, 1, 1; no pruning, no stopping rule).
            self.fields[name].required = False
        self.fields["stop_patience"].validators = []  # the service's range and words (1 to max trials)
        # Each new study its own seed (a clone's comes in `initial`): two studies of the same settings
        # then search differently. Callable, so every new form draws one, and the API, which fills
        # in only plain initial values, leaves it out and gets one from clean_seed.
        self.fields["seed"].initial = fresh_seed
        self.fields["seed"].required = False
        drawn = "The original study's seed, kept by the clone" if "seed" in self.initial else "Drawn at random"
        self.fields["seed"].help_text = (drawn + "; the same seed with the same settings runs the same search again. "
                                         "Left empty: a fresh one.")
        for name, message in NOT_A_NUMBER.items():
            self.fields[name].error_messages["invalid"] = message
            # Text, not a number input: a browser sends a number field it cannot read ("1e", or "0,5"
            # read as "05") as empty or changed, so a typo would save no rule or another value.
            self.fields[name].widget = forms.TextInput(attrs={"inputmode": "decimal", "maxlength": 40})
        self.pruners_explained = PRUNERS_EXPLAINED
        self.pruning_field_names = [name for name in PRUNING_FIELDS if name != "pruner"]
        self.pruning_applies = {pruner: [pruning_field(name) for name in names]
                                for pruner, names in PRUNING_APPLIES.items()}
        # A setting's default depends on the pruner chosen: the page (pruning_form.js) fills it in from
        # pruning_defaults, clean() fills in what is left empty, and the API does not send the model's default.
        self.pruning_defaults = {pruner: {pruning_field(name): defaults_for(pruner)[name] for name in PRUNING_SETTINGS
                                          if name != "pruner"} for pruner in PRUNING_APPLIES}
        self.fields[pruning_field("startup_trials")].initial = None  # the one whose default is the pruner's

    def _objective_metric_widget(self) -> None:
        """A select of the metrics a built-in hypermodel reports on the chosen dataset's task; free
        text for a team hypermodel (it may report anything). study_form.js switches between
        the two when the dataset or hypermodel changes; clean() checks the value either way."""
        self.dataset_tasks = dict(self.fields["dataset"].queryset.values_list("id", "task"))
        self.task_metrics = {str(task): metrics for task, metrics in METRICS_BY_TASK.items()}
        self.builtin_hypermodels = sorted(BUILTIN)
        source = self.data if self.is_bound else self.initial
        task = self.dataset_tasks.get(_int_or_none(source.get("dataset")))
        hypermodel = source.get("hypermodel")
        field = self.fields["objective_metric"]
        if hypermodel in BUILTIN:
            metrics = list(METRICS_BY_TASK.get(task) or dict.fromkeys(m for ms in METRICS_BY_TASK.values() for m in ms))
            current = source.get("objective_metric") or field.initial
            if current and current not in metrics:  # a refused value stays visible beside its error
                metrics.append(current)
            field.widget = forms.Select(choices=[(m, m) for m in metrics])
        else:
            field.widget = forms.TextInput(attrs={"maxlength": 50, "placeholder": "e.g. val_loss"})

    @property
    def hypermodel_description(self) -> str:
        """The description of the hypermodel the form shows as chosen (none for an unknown one)."""
        return self.hypermodel_descriptions.get(str(self["hypermodel"].value() or ""), "")

    @property
    def initial_random_default(self) -> int:
        """What an empty 'initial random trials' means for the space on the page."""
        text = self.data.get("search_space") if self.is_bound else self.initial.get("search_space")
        try:
            rows = load_json(text, what="The search space") if isinstance(text, str) else (text or [])
        except InputError:
            rows = []
        trials = (self.data.get("max_trials") if self.is_bound
                  else self.initial.get("max_trials", self.fields["max_trials"].initial))
        trials = parse_id(trials)  # ASCII digits only: '²'.isdigit() is True, and int('²') raises
        return default_initial_random_trials(rows if isinstance(rows, list) else [], trials)

    def clean_name(self):
        name = self.cleaned_data["name"].strip()
        if not name:
            raise forms.ValidationError("Give the study a name.")
        no_control_characters(name)
        return name

    def clean_seed(self):
        seed = self.cleaned_data.get("seed")
        return fresh_seed() if seed is None else seed

    def clean_search_space(self):
        try:
            rows = load_json(self.cleaned_data["search_space"], what="The search space")
        except InputError as exc:
            raise forms.ValidationError(str(exc)) from None
        if problem := control_character_problem(rows, multiline=False):  # "\u001b" in the JSON text
            raise forms.ValidationError(problem)
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
        space = data.get("search_space")
        if space and hypermodel in BUILTIN:
            wrong = fixed_type_errors(space, BUILTIN[hypermodel].default_space, hypermodel)
            if wrong:
                self.search_space_errors = {str(i): messages for i, messages in wrong.items()}
                self.add_error("search_space", " ".join(m for messages in wrong.values() for m in messages))
        if data.get("objective_direction") == "auto" and metric:
            data["objective_direction"] = infer_direction(metric)
        allowed = METRICS_BY_TASK[dataset.task] + list(COST_METRICS) if dataset and hypermodel in BUILTIN else None
        for name, parse in (("extra_objectives", parse_objectives), ("constraints", parse_constraints)):
            try:
                data[name] = parse(data.get(name), allowed=allowed)
            except ObjectiveError as exc:
                self.add_error(name, str(exc))
        for name, default in COMPUTE_DEFAULTS.items():
            if data.get(name) in (None, "") and name != "queue":
                data[name] = default
        # The settings the chosen pruner does not read are hidden on the page: they keep their defaults.
        applies = PRUNING_APPLIES.get(data.get("pruner") or "none", ())
        defaults = defaults_for(data.get("pruner"))
        for name in PRUNING_SETTINGS:
            key = pruning_field(name)
            if name == "pruner" or (key in self.errors and (name in applies or self.refuse_unused)):
                continue  # a bad value someone can see (or sent through the API) is refused, not replaced
            if name not in applies or data.get(key) is None:
                data[key] = defaults[name]
                self.errors.pop(key, None)
        if not data.get("pruner"):
            data["pruner"] = "none"
        if "stop_min_delta" not in self.errors and data.get("stop_min_delta") is None:
            data["stop_min_delta"] = 0.0
        # The rules live in the service; the form only shows them beside their fields.
        settings = {name: data.get(name) for name in self.Meta.fields if name in data}
        # Parsed objectives and constraints too, for the rules between them and the pruner or tuner.
        settings.update({name: data[name] for name in ("extra_objectives", "constraints")
                         if name in data and name not in self.errors})
        for name, message in study_settings_errors(**settings).items():
            if name in self.fields and name not in self.errors:
                self.add_error(name, message)
        self._check_warm_start(data)
        return data

    def _check_warm_start(self, data: dict) -> None:
        """The seeds must fit this form's search space; the service checks again on create."""
        if "top_k" not in self.errors and data.get("top_k") is None:
            data["top_k"] = DEFAULT_TOP_K
        studies, rows = data.get("seed_from"), data.get("search_space")
        if not studies or not rows or "top_k" in self.errors or "seed_from" in self.errors:
            return
        try:
            warm = warm_start_seeds(team=self.team, studies=studies, top_k=data["top_k"], search_space=rows,
                                    hypermodel=data.get("hypermodel") or "")
        except WarmStartError as exc:
            self.add_error("seed_from", exc.messages)
            return
        count = len(warm.seeds)
        if too_many := seed_count_error(seeds=count, max_trials=data.get("max_trials")):
            self.add_error("seed_from", too_many)
        if count:
            self.warm_start_notes.append(f"{count} configuration{'s' if count != 1 else ''} of earlier trials "
                                         "run first.")
        self.warm_start_notes += warm.notes


class StudyBudgetForm(FormChecks, forms.ModelForm):
    """What may change while a study runs."""

    class Meta:
        model = Study
        fields = ["max_trials", "parallelism", "priority"]
        labels = {"max_trials": "Max trials"}
        help_texts = {"priority": PRIORITY_HELP}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        optional_priority(self)
        for name in ("max_trials", "parallelism"):
            low, high = LIMITS[name]
            self.fields[name].validators += [validators.MinValueValidator(low), validators.MaxValueValidator(high)]
            self.fields[name].widget.attrs.update(min=low, max=high)

