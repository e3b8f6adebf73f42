"""What every form of the project checks besides its own rules, so that no field can forget it:
text without control characters (tabs and line breaks only in a text area), numbers, ids and
dates in the digits 0-9 (int('٣') is 3, and Django's number, date and model-choice fields read
it so), and uploaded file names without control characters. Every form mixes FormChecks in
(tests/layout/test_forms.py holds that); pages show the message under the field, and the API,
which binds the same forms, names the field."""

from django import forms
from django.core.files.uploadedfile import UploadedFile

from experiments.tuning.bounds import control_character_problem, non_ascii_digit


def _problem(field: forms.Field, value) -> str | None:
    if isinstance(value, UploadedFile):
        return control_character_problem(value.name or "", multiline=False, what="The file name")
    if not isinstance(value, str) or isinstance(field.widget, forms.PasswordInput):
        return None  # a password is never shown, and may be anything its owner types
    if problem := control_character_problem(value, multiline=isinstance(field.widget, forms.Textarea)):
        return problem
    if not isinstance(field, forms.CharField) and (digit := non_ascii_digit(value)):
        return f"Write numbers and ids with the digits 0-9, not {digit!r}."
    return None


class FormChecks:
    """Mixed into a form class before Django's (class F(FormChecks, forms.Form)). The values are
    checked as they were sent, once the fields have cleaned them and before the form's clean()
    sees them: a field that already has an error keeps only its own."""

    def _clean_fields(self):
        super()._clean_fields()
        for name, field in self.fields.items():
            if name in self._errors or field.disabled:
                continue
            raw = field.widget.value_from_datadict(self.data, self.files, self.add_prefix(name))
            for value in raw if isinstance(raw, list | tuple) else [raw]:
                if problem := _problem(field, value):
                    self.add_error(name, problem)
                    break
