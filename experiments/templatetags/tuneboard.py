from django import template

register = template.Library()


@register.filter
def get_item(mapping, key):
    """Dictionary lookup with a variable key (hyperparameter and metric names)."""
    if not isinstance(mapping, dict):
        return None
    return mapping.get(key)
