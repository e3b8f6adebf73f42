"""Every form page shows every error its form has, whichever fields the page renders itself (a
radio group, checkboxes, a table of candidates): each field gets a value it must refuse (a
control character in text, an Arabic-Indic digit where a number, an id or a choice belongs),
and every message of the bound form must be on the page the person sees."""

import pytest
from django import forms
from django.urls import reverse
from django.utils.html import escape

pytestmark = pytest.mark.django_db

def bad_value(field: forms.Field, i: int):
    """A value `field` must refuse, or None where none can be typed (a checkbox, a file); the
    i-th field's digit is its own, so that its message differs from its neighbours'."""
    digit = chr(ord("\u0660") + i % 10)  # Arabic-Indic zero to nine
    if isinstance(field, forms.FileField | forms.BooleanField) or isinstance(field.widget, forms.PasswordInput):
        return None
    if isinstance(field, forms.MultipleChoiceField | forms.ModelMultipleChoiceField) or getattr(
            field, "takes_list", False):
        return [digit]
    if isinstance(field, forms.CharField):
        return "bad \x1b[31m"
    return digit


PAGES = {
    "study_new": lambda o: reverse("study_new"),
    "study_clone": lambda o: reverse("study_clone", args=[o["study"].id]),
    "dataset_upload": lambda o: reverse("dataset_upload"),
    "dataset_list": lambda o: reverse("dataset_list"),
    "ensemble_new": lambda o: reverse("ensemble_new"),
    "recipe_new": lambda o: reverse("recipe_new"),
    "recipe_edit": lambda o: reverse("recipe_edit", args=[o["recipe"].id]),
    "recipe_clone": lambda o: reverse("recipe_clone", args=[o["recipe"].id]),
    "prediction_new": lambda o: reverse("prediction_new"),
    "team_new": lambda o: reverse("team_new"),
    "webhook_new": lambda o: reverse("webhook_new"),
    "api_tokens": lambda o: reverse("api_tokens"),
}


@pytest.fixture
def objects(acme, alice, acme_dataset, acme_study, acme_model):
    from experiments.services.recipes import recipe_create

    recipe = recipe_create(team=acme, user=alice, data={"name": "diverse", "dataset": acme_dataset,
                                                        "source_studies": [acme_study]})
    return {"study": acme_study, "recipe": recipe}


@pytest.mark.parametrize("page", PAGES)
def test_every_error_of_the_form_is_on_the_page(alice_client, objects, page):
    url = PAGES[page](objects)
    fields = alice_client.get(url).context["form"].fields
    data = {name: value for i, (name, field) in enumerate(fields.items()) if (value := bad_value(field, i)) is not None}
    response = alice_client.post(url, data)

    assert response.status_code in (200, 400), response.status_code
    form = response.context["form"]
    messages = [(name, message) for name, errors in form.errors.items() for message in errors]
    assert len({name for name, _ in messages}) >= min(2, len(data)), "the bad values were refused"
    content = response.content.decode()
    # Two fields may have the same message: the page shows it as often as the fields have it.
    missing = {message for _, message in messages
               if content.count(escape(message)) < sum(m == message for _, m in messages)}
    assert missing == set(), [(name, message) for name, message in messages if message in missing]
