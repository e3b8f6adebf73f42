"""What every form checks besides its own rules (no control characters, ASCII digits only), mixed into every
form so no field can forget it (docs/design/web-and-security.md)."""

from django import forms
from django.forms.fields import BaseTemporalField

from experiments.tuning.bounds import control_character_problem, non_ascii_digit

# The fields that read a number from the text (an id for a model choice, a date's parts).
_READS_DIGITS = (forms.IntegerField, forms.ModelChoiceField, BaseTemporalField)  # Float, Decimal: IntegerFields


def _problem(field: forms.Field, value) -> tuple[str, bool] | None:
    """(message, whether it replaces the field's own errors), or None."""
    if not isinstance(value, str) or isinstance(field.widget, forms.PasswordInput):
        return None  # a password is never shown, and may be anything its owner types
    if problem := control_character_problem(value, multiline=isinstance(field.widget, forms.Textarea)):
        return problem, False
    if isinstance(field, _READS_DIGITS) and (digit := non_ascii_digit(value)):
        # The field read '٣' as 3: whatever it made of that (a lookup of id 3) is not what was sent.
        return f"Write numbers and ids with the digits 0-9, not {digit!r}.", True
    return None


class FormChecks:
    """Mixed into a form class before Django's: the values are checked as sent, after the fields clean them and before
    the form's clean() sees them."""

    def _clean_fields(self):
        super()._clean_fields()
        for name, field in self.fields.items():
            if field.disabled:
                continue
            raw = field.widget.value_from_datadict(self.data, self.files, self.add_prefix(name))
            found = next(filter(None, (_problem(field, v) for v in (raw if isinstance(raw, list | tuple) else [raw]))),
                         None)
            if found is None:
                continue
            message, replaces = found
            if replaces:
                self._errors.pop(name, None)
            elif name in self._errors:
                continue
            self.add_error(name, message)
