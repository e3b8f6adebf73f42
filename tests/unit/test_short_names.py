"""Long names are cut in the middle, so the end that tells one from its neighbours stays: the
models of trials 1 and 10 of one study no longer both read "…-trial-…"."""

import pytest
from django.template import Context, Template

from experiments.presentation.short_names import NAME_CHARS, shorten

STUDY = "dense-iris-retrained-with-a-long-name"


def test_a_short_name_is_left_as_it_is():
    assert shorten("dense-iris-trial-1") == "dense-iris-trial-1"
    assert shorten("x" * NAME_CHARS) == "x" * NAME_CHARS


def test_trials_1_and_10_keep_their_numbers():
    one, ten = shorten(f"{STUDY}-trial-1"), shorten(f"{STUDY}-trial-10")
    assert one == "dense-iris-re…g-name-trial-1" and ten == "dense-iris-re…-name-trial-10"
    assert len(one) == len(ten) == NAME_CHARS


@pytest.mark.parametrize("limit", [3, 5, 14, 20, 27])
def test_the_cut_keeps_the_start_the_end_and_the_limit(limit):
    name = "iris measurements from the botany department archive"
    short = shorten(name, limit)
    head, tail = short.split("…")
    assert len(short) <= limit and name.startswith(head) and name.endswith(tail)
    assert len(tail) >= len(head)  # the end, where names of a family differ, gets the larger half


def test_the_filter_shortens_with_an_optional_limit_and_escapes():
    template = Template("{{ name|short_name }}|{{ name|short_name:12 }}|{{ html|short_name }}")
    out = template.render(Context({"name": f"{STUDY}-trial-10", "html": "<b>" + "a" * 40 + "</b>"}))
    shown, twelve, escaped = out.split("|")
    assert shown == shorten(f"{STUDY}-trial-10") and twelve == "dense…ial-10"
    assert escaped.startswith("&lt;b&gt;") and escaped.endswith("&lt;/b&gt;")
