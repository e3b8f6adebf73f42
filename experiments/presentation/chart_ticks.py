"""Readable axis ticks (1-2-5 steps, log decades, short labels) for the charts Plotly does not tick well by itself,
such as parallel coordinates labelled -3.481198."""

import math

from experiments.presentation import short_names

TARGET_TICKS = 5
SMALL = 1e-3  # below this (and from LARGE up) a label is written as a power: 1e-4, 2e5
LARGE = 1e4
LABEL_CHARS = 14  # an axis title or category longer than this is cut, its full text kept elsewhere


def short(text: str, limit: int = LABEL_CHARS) -> str:
    """`text` cut to `limit` characters in the middle, so names that differ at their end
    (units_layer_1, units_layer_2) stay apart."""
    return short_names.shorten(text, limit)


def number_label(value: float, step: float | None = None) -> str:
    """A tick's label: as many decimals as the step needs and no more (0.15, not 0.150000),
    a power of ten for the very small and very large (1e-4, 2e4)."""
    if value == 0:
        return "0"
    if abs(value) < SMALL or abs(value) >= LARGE:
        mantissa, exponent = f"{value:.1e}".split("e")
        mantissa = mantissa.rstrip("0").rstrip(".")
        return f"{mantissa}e{int(exponent)}"
    decimals = max(0, -math.floor(math.log10(step))) if step else 6
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def nice_step(span: float, target: int = TARGET_TICKS) -> float:
    """The smallest step of 1, 2 or 5 × 10^k that cuts `span` into at most `target` intervals."""
    raw = span / target
    magnitude = 10 ** math.floor(math.log10(raw))
    return next(m * magnitude for m in (1, 2, 5, 10) if span / (m * magnitude) <= target)


def linear_ticks(low: float, high: float) -> dict:
    """Ticks on a nice step and the axis range widened to the ticks around the data."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return {}
    if low == high:
        return {"tickvals": [low], "ticktext": [number_label(low)]}
    step = nice_step(high - low)
    first, last = math.floor(low / step + 1e-9), math.ceil(high / step - 1e-9)
    values = [round(i * step, 12) for i in range(first, last + 1)]
    return {"tickvals": values, "ticktext": [number_label(v, step) for v in values], "range": [values[0], values[-1]]}


def log_ticks(low: float, high: float) -> dict:
    """Ticks for an axis of log10 values (low, high are exponents), labelled with the values
    themselves: 1, 2 and 5 within a decade when the data spans one or less, else the decades;
    the axis ends at the nearest 1, 2 or 5 around the data, so it wastes no decade."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return {}
    first, last = math.floor(low + 1e-9), math.ceil(high - 1e-9)
    last = max(last, first + 1)
    candidates = [e + math.log10(m) for e in range(first, last + 1) for m in (1, 2, 5)]
    below = max(v for v in candidates if v <= low + 1e-9)
    above = min(v for v in candidates if v >= high - 1e-9)
    if last - first <= 1:
        values = [v for v in candidates if below - 1e-9 <= v <= above + 1e-9]
    else:
        values = sorted({below, above, *(float(e) for e in range(first, last + 1) if below < e < above)})
    labels = [number_label(float(f"{10 ** v:.6g}")) for v in values]
    return {"tickvals": [round(v, 9) for v in values], "ticktext": labels, "range": [values[0], values[-1]]}
