"""Long names shortened in the middle for tables and chart labels, since names of one family differ at their end
(dense-iris-trial-1, -10); pages keep the full name in a tooltip."""

ELLIPSIS = "…"
# About what 14-16rem of a table's 15 px text holds (the name columns at 1280 px, one line a row).
NAME_CHARS = 28


def shorten(text, limit: int = NAME_CHARS) -> str:
    """`text` in at most `limit` characters, cut in the middle with an ellipsis; the end keeps
    the larger half."""
    text = str(text)
    if len(text) <= limit:
        return text
    kept = max(limit - 1, 2)
    tail = (kept + 1) // 2
    return text[: kept - tail].rstrip() + ELLIPSIS + text[-tail:].lstrip()
