"""The serving contract read from stored signatures (experiments/serving/contract.py) and the REST
request a registered model's page shows for it (experiments/presentation/serving_requests.py)."""

import json

from experiments.presentation.serving_requests import serving_request
from experiments.serving.contract import contract_differences, model_contract, registered_contract


def stored(keras_name: str, served_as: str | None, shape=(None, 8, 8, 1), dtype="uint8", output="output_0") -> dict:
    """A signature as workers/export/formats.py stores it; served_as None: no SavedModel made yet (a JAX worker's)."""
    keras_inputs = [{"name": keras_name, "shape": list(shape), "dtype": dtype}]
    signature = {"keras": {"inputs": keras_inputs, "outputs": [{"name": "x", "shape": [None, 10]}]}}
    if served_as is not None:
        signature["serving"] = {"name": "serving_default", "inputs": [keras_inputs[0] | {"name": served_as}],
                                "outputs": [{"name": output, "shape": [None, 10], "dtype": "float32"}]}
    return signature


IMAGES = {"inputs": [{"name": "input_0", "shape": [None, 8, 8, 1], "dtype": "uint8"}], "outputs": ["output_0"]}


def test_models_of_two_families_exported_now_have_one_contract():
    cnn, dense = model_contract(stored("images", "input_0")), model_contract(stored("features", "input_0"))
    assert cnn == dense == IMAGES
    assert contract_differences(cnn, dense) == []


def test_a_model_without_a_savedmodel_yet_is_held_to_the_names_its_export_will_have():
    assert model_contract(stored("images", None)) == IMAGES


def test_an_older_export_keeps_the_keras_name_it_serves_and_the_difference_is_named():
    old = model_contract(stored("features", "features"))
    assert old["inputs"][0]["name"] == "features"
    assert contract_differences(IMAGES, old) == ["its input is served as 'features', not 'input_0'"]
    other = model_contract(stored("features", "input_0", shape=(None, 4), dtype="float32", output="scores"))
    assert contract_differences(IMAGES, other) == ["its input is float32 (None, 4), not uint8 (None, 8, 8, 1)",
                                                   "it answers under 'scores', not 'output_0'"]
    assert model_contract({}) == {"inputs": [], "outputs": ["output_0"]}


def test_a_registered_model_row_from_before_names_adopts_its_first_versions():
    row = [{"shape": [None, 8, 8, 1], "dtype": "uint8"}]
    first = model_contract(stored("images", "images"))
    assert registered_contract(row, [], first) == {
        "inputs": [{"name": "images", "shape": [None, 8, 8, 1], "dtype": "uint8"}], "outputs": ["output_0"]}
    assert registered_contract(row, [], None) == IMAGES
    assert registered_contract(IMAGES["inputs"], ["output_0"], first) == IMAGES  # recorded names win


def test_the_rest_body_names_the_input_with_one_example_nested_as_its_shape():
    request = serving_request(name="digits", contract=IMAGES, aliases=["staging", "production"])
    assert (request["method"], request["path"]) == ("POST", "/v1/models/digits/labels/production:predict")
    body = json.loads(request["body"])
    (example,) = body["inputs"]["input_0"]
    assert (len(example), len(example[0]), len(example[0][0])) == (8, 8, 1) and example[0][0][0] == 0
    assert not request["shortened"]
    assert request["inputs"][0]["text"] == "uint8 (None, 8, 8, 1)"
    assert request["inputs"][0]["values"] == "8 × 8 × 1 nested lists of integers 0-255"
    assert request["outputs"] == ["output_0"]

    table = {"inputs": [{"name": "input_0", "shape": [None, 4], "dtype": "float32"}], "outputs": ["output_0"]}
    assert serving_request(name="iris", contract=table, aliases=[])["path"] == "/v1/models/iris:predict"
    assert json.loads(serving_request(name="iris", contract=table, aliases=[])["body"]) == {
        "inputs": {"input_0": [[0.0, 0.0, 0.0, 0.0]]}}
    texts = {"inputs": [{"name": "input_0", "shape": [None], "dtype": "string"}], "outputs": ["output_0"]}
    assert json.loads(serving_request(name="t", contract=texts, aliases=[])["body"]) == {
        "inputs": {"input_0": ["an example text"]}}


def test_a_large_example_is_shown_shortened_and_says_so():
    photos = {"inputs": [{"name": "input_0", "shape": [None, 32, 32, 3], "dtype": "uint8"}], "outputs": ["output_0"]}
    request = serving_request(name="photos", contract=photos, aliases=["production"])
    assert request["shortened"]
    assert request["body"] == ('{"inputs": {"input_0": [[[[0, 0, 0], [0, 0, 0], … 32 in all], '
                               '[[0, 0, 0], [0, 0, 0], … 32 in all], … 32 in all]]}}')
