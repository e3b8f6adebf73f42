"""What the model page's prediction box shows (its recent jobs), loaded by its own include so
the model page's view stays as it is."""

from django import template

from experiments.selectors.predictions import model_predictions

register = template.Library()


@register.simple_tag
def recent_predictions(model):
    return model_predictions(model=model)
