"""Reading rendered pages in tests."""

import json
import re

from django.utils.html import escape


def page_text(response) -> str:
    return response.content.decode()


def shows(response, message: str) -> bool:
    """The message appears on the page as the template renders it (HTML-escaped)."""
    return escape(message) in page_text(response)


def json_script(response, element_id: str):
    match = re.search(
        rf'<script id="{re.escape(element_id)}" type="application/json">(.*?)</script>',
        page_text(response),
        re.S,
    )
    assert match, f"The page has no json_script with id {element_id!r}."
    return json.loads(match.group(1))
