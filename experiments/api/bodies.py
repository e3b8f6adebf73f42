"""JSON bodies turned into what the pages' forms read, so the API is validated by the very forms the pages use,
with the same messages (docs/design/web-and-security.md)."""

import json

from django import forms
from django.http import QueryDict
from rest_framework import exceptions, serializers

from experiments.api.errors import NON_FIELD
from experiments.tuning.bounds import control_character_problem

_NUMBER_FIELDS = (forms.IntegerField, forms.FloatField, forms.DecimalField, forms.ModelChoiceField)
_MULTIPLE_FIELDS = (forms.MultipleChoiceField, forms.ModelMultipleChoiceField)
_TRUTHS = {"true": True, "on": True, "1": True, "false": False, "off": False, "0": False}


def _kind(field: forms.Field) -> str:
    # FloatField is an IntegerField in Django: ask about it first.
    if isinstance(field, forms.IntegerField | forms.ModelChoiceField) and not isinstance(field, forms.FloatField):
        return "a whole number"
    if isinstance(field, _NUMBER_FIELDS):
        return "a number"
    return "text"


def _what(value) -> str:
    return {bool: "true/false", list: "a list", dict: "an object", int: "a number",
            float: "a number"}.get(type(value), type(value).__name__)


def _scalar(value) -> bool:
    return isinstance(value, str | int | float) and not isinstance(value, bool)


def _field_value(field: forms.Field, value, *, json_field: bool):
    """The value as the form's field reads it from a page's POST; ValueError(message) if it has the
    wrong type for that field."""
    if json_field:
        return value if isinstance(value, str) else json.dumps(value)
    if isinstance(field, forms.BooleanField):
        if isinstance(value, str) and value.strip().lower() in _TRUTHS:  # a form or multipart body
            value = _TRUTHS[value.strip().lower()]
        if not isinstance(value, bool):
            raise ValueError(f"Must be true or false, not {_what(value)}.")
        return "on" if value else None
    if isinstance(field, _MULTIPLE_FIELDS) or getattr(field, "takes_list", False):
        values = value if isinstance(value, list) else [value]
        if not all(_scalar(v) for v in values):
            raise ValueError("Must be a list of ids or names.")
        return [str(v) for v in values]
    if not _scalar(value):
        raise ValueError(f"Must be {_kind(field)}, not {_what(value)}.")
    if isinstance(value, str) or isinstance(field, _NUMBER_FIELDS):
        return str(value)
    raise ValueError(f"Must be {_kind(field)}, not {_what(value)}.")


def form_input(form_fields: dict, data: dict, *, json_fields: tuple[str, ...] = ()) -> QueryDict:
    """`data` (a JSON object, or a form/multipart body already flattened) as the POST data a page
    would send to a form with `form_fields`. Raises a ValidationError naming every field whose value
    has the wrong type; unknown fields are the caller's (`strict`) to refuse."""
    converted, errors = QueryDict(mutable=True), {}
    for name, value in data.items():
        field = form_fields.get(name)
        if value is None or field is None:
            continue
        try:
            cleaned = _field_value(field, value, json_field=name in json_fields)
        except ValueError as exc:
            errors[name] = [str(exc)]
            continue
        if isinstance(cleaned, list):
            converted.setlist(name, cleaned)
        elif cleaned is not None:
            converted[name] = cleaned
    if errors:
        raise exceptions.ValidationError(errors)
    return converted


def with_initial(form_fields: dict, data: QueryDict) -> QueryDict:
    """What the page's form would have posted: its initial values for the fields left out."""
    for name, field in form_fields.items():
        if name not in data and field.initial is not None and not callable(field.initial):
            if isinstance(field, forms.BooleanField):
                if field.initial:
                    data[name] = "on"
            else:
                data[name] = str(field.initial)
    return data


def body_object(request) -> dict:
    """The request body as a plain dict; every API write reads it here, so this is where a control character in any of
    its text is refused, naming the field."""
    data = request.data
    if isinstance(data, QueryDict):
        data = {k: (v if len(v := data.getlist(k)) > 1 else v[0]) for k in data}
    if not isinstance(data, dict):
        raise exceptions.ValidationError({NON_FIELD: [f"Send a JSON object, not {_what(data)}."]})
    errors = {str(name): [problem] for name, value in data.items()
              if (problem := control_character_problem(name) or control_character_problem(value))}
    if errors:
        raise exceptions.ValidationError(errors)
    return dict(data)


class StrictSerializer(serializers.Serializer):
    """Refuses fields it does not know, and a body that is not an object."""

    def validate(self, attrs):
        unknown = sorted(set(self.initial_data) - set(self.fields)) if hasattr(self.initial_data, "keys") else []
        if unknown:
            raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        return attrs


class NoFields(StrictSerializer):
    """An action's body: none (any field is unknown)."""


class FormError(exceptions.ValidationError):
    """A form's errors as they are (so the messages are the page's)."""

    def __init__(self, errors: dict):
        super().__init__(errors)


def strict(serializer_class, data: dict) -> None:
    """Refuse unknown fields before the forms see the body."""
    unknown = sorted(set(data) - set(serializer_class().fields))
    if unknown:
        raise exceptions.ValidationError({name: ["Unknown field."] for name in unknown})


def validated(form_class, data: dict, *, files=None, json_fields: tuple[str, ...] = (), defaults: bool = True,
              **kwargs):
    """The page's form, bound to the body as the page would post it, and valid; else a 400 with the
    form's own messages."""
    fields = form_class(**kwargs).fields
    values = form_input(fields, data, json_fields=json_fields)
    form = form_class(with_initial(fields, values) if defaults else values, files, **kwargs)
    if not form.is_valid():
        errors = dict(form.errors)
        for row, messages in getattr(form, "search_space_errors", {}).items():
            errors[f"search_space.{row}"] = messages
        raise FormError(errors)
    return form
