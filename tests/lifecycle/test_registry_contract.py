"""One serving contract per registered model (services on PostgreSQL, signatures as
workers/export/formats.py stores them): models of different families taking one input are versions of
one name; a version whose SavedModel serves other input keys (exported before inputs were named
by position) is refused with what differs and nothing saved; a registered model made before keys
were recorded adopts its first version's and keeps them."""

import pytest

from experiments.models import ModelVersion, RegisteredModel
from experiments.selectors.registry import register_suggestion, registered_model_detail
from experiments.services.registry import RegistryError, registry_register
from tests.integration.helpers import saved_study
from tests.web.registry_rows import registrable, signature

pytestmark = pytest.mark.django_db

IMAGE = {"shape": (None, 8, 8, 1), "dtype": "uint8", "classes": 10}


@pytest.fixture
def study(acme, alice, iris):
    return saved_study(acme, alice, iris, name="digits study", hypermodel="dense")


def image_model(acme, alice, study, number: int, *, keras_name: str, served_as: str = "input_0"):
    return registrable(acme, alice, study, number,
                       signature=signature(**IMAGE, keras_name=keras_name, served_as=served_as))


def test_a_cnn_and_a_dense_model_of_one_input_are_versions_of_one_name(acme, alice, study):
    cnn = image_model(acme, alice, study, 1, keras_name="images")
    dense = image_model(acme, alice, study, 2, keras_name="features")
    registry_register(team=acme, model=cnn, name="digits", user=alice)
    assert registry_register(team=acme, model=dense, name="digits", user=alice).version == 2
    registered = RegisteredModel.objects.get()
    assert registered.input_signature == [{"name": "input_0", "shape": [None, 8, 8, 1], "dtype": "uint8"}]
    assert registered.output_keys == ["output_0"]
    detail = registered_model_detail(registered=registered)
    assert [v.contract_differences for v in detail["versions"]] == [[], []]


def test_a_version_exported_under_its_keras_input_name_is_refused_naming_what_differs(acme, alice, study):
    registry_register(team=acme, model=image_model(acme, alice, study, 1, keras_name="images"), name="digits",
                      user=alice)
    old = image_model(acme, alice, study, 2, keras_name="features", served_as="features")
    with pytest.raises(RegistryError) as refused:
        registry_register(team=acme, model=old, name="digits", user=alice)
    message = str(refused.value)
    assert f"{old} cannot be a version of digits: its input is served as 'features', not 'input_0'." in message
    assert "exported before Tuneboard named its inputs input_0, input_1, ..." in message
    assert "Register it under another name." in message
    assert ModelVersion.objects.count() == 1
    # The Register form does not propose the name it cannot join.
    assert register_suggestion(team=acme, model=old)["name"] != "digits"


def test_a_registered_model_from_before_keeps_the_names_its_first_version_serves(acme, alice, study):
    first = image_model(acme, alice, study, 1, keras_name="images", served_as="images")
    registry_register(team=acme, model=first, name="digits", user=alice)
    # As rows were before keys were recorded: shapes and dtypes only.
    RegisteredModel.objects.update(input_signature=[{"shape": [None, 8, 8, 1], "dtype": "uint8"}], output_keys=[])

    stable = image_model(acme, alice, study, 2, keras_name="features")
    with pytest.raises(RegistryError, match="its input is served as 'input_0', not 'images'"):
        registry_register(team=acme, model=stable, name="digits", user=alice)
    assert RegisteredModel.objects.get().output_keys == []  # a refusal changes nothing

    same = image_model(acme, alice, study, 3, keras_name="images", served_as="images")
    assert registry_register(team=acme, model=same, name="digits", user=alice).version == 2
    registered = RegisteredModel.objects.get()
    assert registered.input_signature == [{"name": "images", "shape": [None, 8, 8, 1], "dtype": "uint8"}]
    assert registered.output_keys == ["output_0"]


def test_versions_registered_before_the_keys_were_compared_are_flagged(acme, alice, study):
    """What the issue found: a cnn (`images`) and a dense model (`features`) accepted as v1 and v2."""
    registry_register(team=acme, model=image_model(acme, alice, study, 1, keras_name="images", served_as="images"),
                      name="digits", user=alice)
    registered = RegisteredModel.objects.get()
    ModelVersion.objects.create(registered_model=registered, version=2, trained_model=image_model(
        acme, alice, study, 2, keras_name="features", served_as="features"))
    detail = registered_model_detail(registered=registered)
    assert [v.contract_differences for v in detail["versions"]] == [
        ["its input is served as 'features', not 'images'"], []]
    assert detail["serving"]["body"].startswith('{"inputs": {"images": [[[[0], ')
