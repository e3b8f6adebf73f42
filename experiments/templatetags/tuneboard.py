from django import template

register = template.Library()


@register.filter
def get_item(mapping, key):
    """Dictionary lookup with a variable key (hyperparameter and metric names)."""
    if not isinstance(mapping, dict):
        return None
    return mapping.get(key)


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
