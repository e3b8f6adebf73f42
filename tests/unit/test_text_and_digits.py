"""The one definition of text a person may send (no control characters; tabs and line breaks
only where text has lines) and of the digits numbers and ids are written in (0-9 only)."""

import pytest

from experiments.selectors.registry import REFERENCE
from experiments.tuning.bounds import control_character_problem, non_ascii_digit
from experiments.tuning.search_space import SearchSpaceError, validate_search_space

ARABIC_INDIC_THREE = "\u0663"


@pytest.mark.parametrize(("text", "named"), [
    ("a\x00b", "a NUL character (U+0000) at character 2"),
    ("red \x1b[31m", "an escape character (U+001B) at character 5"),
    ("\x07", "a control character (U+0007) at character 1"),
    ("x\x7f", "a delete character (U+007F)"),
    ("csi \x9b2J", "a control character (U+009B)"),  # C1: the one-byte form of a terminal's CSI
    ("abc\u202etxt.exe", "a text direction control (U+202E) at character 4"),  # shows as 'abcexe.txt'
    ("\u2066x\u2069", "a text direction control (U+2066) at character 1"),
])
def test_it_names_each_control_character_and_where_it_is(text, named):
    problem = control_character_problem(text)
    assert problem.startswith(f"This text holds {named}") and "remove it" in problem


def test_lines_and_tabs_are_text_only_where_text_has_lines():
    assert control_character_problem("one\ttwo\r\nthree") is None
    assert "a line break (U+000A)" in control_character_problem("one\ntwo", multiline=False)
    assert "a tab (U+0009)" in control_character_problem("one\ttwo", multiline=False)


def test_it_finds_text_nested_in_json_and_names_the_place():
    problem = control_character_problem([{"name": "units", "values": ["ok", "bad\x1b"]}])
    assert "in [0].values[1]" in problem
    assert "in [0]" in control_character_problem([{"ke\x00y": 1}])
    assert control_character_problem({"a": [1, 2.5, None, True, "fine"]}) is None


def test_printable_unicode_is_text():
    assert control_character_problem("naïve — 漢字 \u0663 🙂 \u00a0") is None


def test_digits_other_than_ascii_are_found():
    assert non_ascii_digit(f"7{ARABIC_INDIC_THREE}") == ARABIC_INDIC_THREE
    assert non_ascii_digit("x\u00b2") == "\u00b2"
    assert non_ascii_digit("1234567890") is None


@pytest.mark.parametrize("reference", [f"digits/{ARABIC_INDIC_THREE}", "digits/\u00b3", "digits/3\n",
                                       "digits/\uff13", "digits@prod\n"])
def test_a_registry_reference_takes_versions_in_ascii_digits_and_nothing_after(reference):
    assert REFERENCE.match(reference) is None


def test_a_registry_reference_still_reads_ascii_versions_and_aliases():
    assert REFERENCE.match("digits/12")["version"] == "12"
    assert REFERENCE.match("digits@production")["alias"] == "production"


def test_search_space_numbers_typed_in_other_digits_are_not_numbers():
    with pytest.raises(SearchSpaceError):
        validate_search_space([{"name": "units", "type": "int", "min": f"{ARABIC_INDIC_THREE}2", "max": "64",
                                "parent": None, "parent_values": []}])
    assert validate_search_space([{"name": "units", "type": "int", "min": "32", "max": "64", "parent": None,
                                   "parent_values": []}])[0]["min"] == 32
