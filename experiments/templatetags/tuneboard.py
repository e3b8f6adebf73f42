import math

from django import template
from django.utils import timezone
from django.utils.dateformat import format as date_format
from django.utils.html import format_html
from django.utils.timesince import timesince

from experiments.models import ModelFile
from experiments.presentation import costs, figures, prediction_csv, short_names

register = template.Library()


@register.filter
def get_item(mapping, key):
    """Dictionary lookup with a variable key (hyperparameter and metric names)."""
    if not isinstance(mapping, dict):
        return None
    return mapping.get(key)


@register.filter
def short_name(value, limit=short_names.NAME_CHARS) -> str:
    """A long name cut in the middle, so the end that tells it from its neighbours stays
    ("dense-iris-re…-name-trial-10"); the template puts the full name in a title."""
    return short_names.shorten(value, int(limit))


@register.filter
def hp_value(value):
    """Hyperparameter values for tables: floats to 4 significant digits, missing as a dash."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    return value


@register.filter
def duration(seconds):
    """A short human duration: 45 s, 12 min, 3 h 5 min."""
    if seconds is None:
        return "—"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


@register.filter
def span(earlier, later=None) -> str:
    """From `earlier` to `later` (now) in words, as timesince says it, but "under a minute" where
    timesince says "0 minutes" (a page refreshed every few seconds showed that for the first minute)."""
    if earlier is None or later == "":
        return "—"
    later = later or timezone.now()
    if abs((later - earlier).total_seconds()) < 60:
        return "under a minute"
    return timesince(min(earlier, later), max(earlier, later))  # either way round (a clock ahead)


@register.filter
def figure(value):
    """The one way a metric is printed on every page: 4 decimals (0.8750), 4 significant
    digits for tiny magnitudes (3.2e-05, which 4 decimals would print as 0.0000), a dash when
    missing."""
    if value is None or value == "":
        return "—"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    if value != 0 and abs(value) < 1e-3:
        return f"{value:.4g}"
    return f"{value:.4f}"


@register.filter
def trial_name(trial) -> str:
    """"Trial 3": the study's 1-based start order, the same number its charts and CSV use."""
    number = trial.get("number") if isinstance(trial, dict) else getattr(trial, "number", None)
    return figures.trial_label(number).capitalize()


@register.filter
def seeded_label(source) -> str:
    """A seeded trial's mark: "seeded from Trial 3 of baseline" (`source` is the earlier trial)."""
    return f"seeded from {figures.seed_label(number=source.number, study_name=source.study.name)}"


@register.filter
def metric_list(metrics) -> str:
    """A metrics dict as "accuracy 0.9500, loss 0.1234" (names sorted), or a dash."""
    if not metrics:
        return "—"
    return ", ".join(f"{name} {figure(value)}" for name, value in sorted(metrics.items()))


@register.filter
def source_long(key: str) -> str:
    """The long description of a validation-figure source (experiments/presentation/figures.py SOURCES)."""
    source = figures.SOURCES.get(key)
    return source.long if source else ""


@register.filter
def format_label(fmt: str) -> str:
    """A download format as its download link is labelled ("TFLite, float32")."""
    return dict(ModelFile.Format.choices).get(fmt, fmt)


FORMAT_FAMILIES = {"keras": ".keras", "savedmodel": "SavedModel", "tflite": "TFLite", "tflite_int8": "TFLite"}


@register.filter
def format_families(formats) -> str:
    """Formats as a person names them together: ["savedmodel", "tflite", "tflite_int8"] ->
    "SavedModel and TFLite"."""
    names = list(dict.fromkeys(FORMAT_FAMILIES.get(fmt, fmt) for fmt in formats or ()))
    return " and ".join(names) if len(names) < 3 else ", ".join(names[:-1]) + " and " + names[-1]


@register.filter
def when(moment):
    """A table's date, short enough not to wrap: "14:05" today, "12 Mar 14:05" this year,
    "12 Mar 2024" before; the full date and time in its tooltip."""
    if moment is None:
        return "—"
    local, now = timezone.localtime(moment), timezone.localtime()
    if local.date() == now.date():
        shown = date_format(local, "H:i")
    elif local.year == now.year:
        shown = date_format(local, "j M H:i")
    else:
        shown = date_format(local, "j M Y")
    return format_html('<time datetime="{}" title="{}">{}</time>', local.isoformat(),
                       date_format(local, "Y-m-d H:i"), shown)


@register.filter
def any_figures(value) -> str:
    """metric_list for a dict, one figure for a number, a dash otherwise: run records (a recipe
    run's comparison) may hold either, or nothing when the run failed."""
    if isinstance(value, dict):
        return metric_list(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return figure(value)
    return "—"


@register.filter
def preview_table(job) -> dict:
    """A prediction's first rows as pages show them, in the CSV's column order: probabilities as
    fixed decimals (prediction_csv.probability_text), regression values as figures, each number's
    full text, as the CSV has it, kept for its tooltip. {"header": [...], "rows": [[(shown, full)]]}."""
    preview = job.preview or []
    if not preview:
        return {"header": [], "rows": []}
    dataset = job.model.dataset
    columns = prediction_csv.preview_columns(preview[0], task=dataset.task, classes=dataset.classes)
    show = prediction_csv.probability_text if dataset.task == "classification" else figure
    rows = [[(_shown(row.get(name, ""), show), row.get(name)) if number else (row.get(name, ""), None)
             for name, number in columns] for row in preview]
    return {"header": [name for name, _ in columns], "rows": rows}


def _shown(text: str, show) -> str:
    try:
        return show(float(text))
    except (TypeError, ValueError):  # never expected: the worker writes numbers there
        return text


@register.filter
def device_cost(seconds, kind) -> str:
    """"12.40 USD" for device time of a kind with a price per device-hour; "" without one."""
    return costs.money(costs.device_cost(seconds, kind))
