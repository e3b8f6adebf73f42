"""Fields and validators the forms of several areas build theirs from, so that a number or a name
is refused with the same words everywhere (the bounds themselves are tuning/bounds.py's)."""

from django import forms
from django.core.exceptions import ValidationError

from experiments.tuning.bounds import MAX_SEED, control_character_problem


def whole_number_field(label: str, *, low: int, high: int, **kwargs) -> forms.IntegerField:
    """An IntegerField whose every refusal (not a number, too low, too high) reads the same."""
    message = f"{label} must be a whole number from {low:,} to {high:,}."
    return forms.IntegerField(label=label, min_value=low, max_value=high, **kwargs, error_messages={
        "invalid": message, "min_value": message, "max_value": message})


def seed_field(label: str = "Seed", **kwargs) -> forms.IntegerField:
    return whole_number_field(label, low=0, high=MAX_SEED, initial=0, **kwargs)


def no_control_characters(value: str) -> None:
    """For names: a line break in a name breaks CSV file names in headers and table rows."""
    if isinstance(value, str) and control_character_problem(value, multiline=False):
        raise ValidationError("A name cannot contain control characters (line breaks, tabs).")
