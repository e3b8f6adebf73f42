"""Every form of the project mixes FormChecks in (experiments/forms/checks.py), so that no field,
however new, takes control characters or numbers in other digits than 0-9."""

import importlib
import pkgutil

from django import forms

import experiments
from experiments.forms.checks import FormChecks

# Forms FormChecks would check nothing of: every field is a password, which is never shown and
# may hold whatever its owner types (and security/ is a leaf the forms layer does not reach).
PASSWORDS_ONLY = {"experiments.security.login_limits.LimitedPasswordChangeForm"}


def project_forms() -> list[type]:
    for module in pkgutil.walk_packages(experiments.__path__, "experiments."):
        if ".migrations" not in module.name:
            importlib.import_module(module.name)
    found, todo = [], [forms.BaseForm]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if sub.__module__.startswith("experiments."):
                found.append(sub)
    return found


def test_every_form_of_the_project_mixes_the_checks_in():
    found = project_forms()
    assert len(found) >= 20, [f.__name__ for f in found]
    unchecked = {f"{f.__module__}.{f.__qualname__}" for f in found if not issubclass(f, FormChecks)}
    assert unchecked == PASSWORDS_ONLY


def test_the_exempt_forms_hold_only_passwords():
    for form in project_forms():
        if f"{form.__module__}.{form.__qualname__}" in PASSWORDS_ONLY:
            widgets = {type(field.widget) for field in form.base_fields.values()}
            assert widgets == {forms.PasswordInput}, form
