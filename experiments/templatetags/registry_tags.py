"""The registry's part of the model page: which versions the model is (with their aliases) and
what its Register form proposes, read here so the page's view stays the models' own."""

from django import template

from experiments.selectors.registry import model_registry_entries, register_suggestion

register = template.Library()


@register.simple_tag
def model_registry(model) -> dict:
    suggestion = register_suggestion(team=model.team, model=model)
    return {"entries": model_registry_entries(model=model), **suggestion}
