"""The catalog the web shows: every built-in's default space is valid, each family says which
kinds of data it takes, and a team hypermodel may declare its kinds with an "@kind" suffix."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from experiments.datasets import core
from experiments.tuning.hypermodel_catalog import (
    BUILTIN,
    KINDS,
    HypermodelEntry,
    hypermodel_entries,
    hypermodels_for_kind,
    kind_mismatch,
    parse_hypermodel_setting,
)
from experiments.tuning.search_space import validate_search_space


def test_the_catalog_knows_the_same_kinds_as_the_dataset_parsers():
    assert KINDS == core.KINDS


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_each_builtin_default_space_is_valid_and_unchanged_by_validation(name):
    space = BUILTIN[name].default_space
    assert validate_search_space(space) == space
    assert BUILTIN[name].description


def test_each_builtin_ends_with_the_shared_optimizer_rows():
    for entry in BUILTIN.values():
        names = [row["name"] for row in entry.default_space]
        assert names[-3:] == ["optimizer", "learning_rate", "momentum"], entry.name
        momentum = entry.default_space[-1]
        assert (momentum["parent"], momentum["parent_values"]) == ("optimizer", ["sgd"])


def test_the_builtins_take_the_kinds_they_are_built_for():
    kinds = {name: entry.kinds for name, entry in BUILTIN.items()}
    assert kinds == {
        "dense": ("tabular", "image", "sequence"),
        "cnn": ("image",),
        "text": ("text",),
        "sequence": ("sequence",),
        "resnet": ("image",),
        "xception": ("image",),
    }


def test_efficientnet_is_not_offered(settings):
    settings.HYPERMODELS = []
    assert "efficientnet" not in hypermodel_entries()


def test_hypermodels_for_kind_lists_every_entry_with_why_it_does_not_fit(settings):
    settings.HYPERMODELS = []
    found = {entry.name: why for entry, why in hypermodels_for_kind("image")}
    assert set(found) == set(BUILTIN)
    assert found["cnn"] is None and found["dense"] is None and found["resnet"] is None
    assert found["text"] == "takes text; this dataset holds images"
    assert found["sequence"] == "takes sequences; this dataset holds images"


def test_text_fits_only_the_text_family(settings):
    settings.HYPERMODELS = []
    usable = [entry.name for entry, why in hypermodels_for_kind("text") if why is None]
    assert usable == ["text"]
    reasons = dict((entry.name, why) for entry, why in hypermodels_for_kind("text"))
    assert reasons["dense"] == "takes tabular features, images or sequences; this dataset holds text"


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="Unknown data kind 'video'"):
        kind_mismatch(BUILTIN["dense"], "video")


def test_a_team_hypermodel_without_a_suffix_takes_tabular_data():
    entry = parse_hypermodel_setting(["mlp=team.models:build_mlp"])["mlp"]
    assert entry.kinds == ("tabular",)
    assert entry.target == "team.models:build_mlp"


def test_a_team_hypermodel_declares_its_kinds_after_an_at_sign():
    found = parse_hypermodel_setting(["vit=team.models:build_vit@image", "multi=team.models:build@image+sequence"])
    assert found["vit"].kinds == ("image",)
    assert found["vit"].target == "team.models:build_vit"  # what the worker imports: no suffix
    assert found["multi"].kinds == ("image", "sequence")
    assert kind_mismatch(found["multi"], "text") == "takes images or sequences; this dataset holds text"


def test_a_team_hypermodel_without_a_name_is_named_after_its_function_not_its_suffix():
    assert set(parse_hypermodel_setting(["team.models:build_vit@image"])) == {"build_vit"}


@pytest.mark.parametrize("entry", ["vit=team.models:build_vit@video", "vit=team.models:build_vit@",
                                   "vit=team.models:build_vit@image+"])
def test_an_unknown_or_empty_kind_is_a_configuration_error(entry):
    with pytest.raises(ImproperlyConfigured, match="data kind") as caught:
        parse_hypermodel_setting([entry])
    assert "tabular, image, text, sequence" in str(caught.value)


def test_a_suffix_without_a_target_is_still_a_configuration_error():
    with pytest.raises(ImproperlyConfigured, match="must look like name=package.module:build_model"):
        parse_hypermodel_setting(["vit=@image"])


def test_team_entries_show_up_with_their_kinds(settings):
    settings.HYPERMODELS = ["vit=team.models:build_vit@image"]
    found = dict((entry.name, why) for entry, why in hypermodels_for_kind("image"))
    assert found["vit"] is None
    assert dict((entry.name, why) for entry, why in hypermodels_for_kind("tabular"))["vit"] == (
        "takes images; this dataset holds tabular features")


def test_an_entry_defaults_to_tabular():
    assert HypermodelEntry(name="x", description="").kinds == ("tabular",)
