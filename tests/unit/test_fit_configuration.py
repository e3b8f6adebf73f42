"""A trial's values brought into another search space (warm starts): what fits, what takes
the space's default, and a message naming every hyperparameter that does not fit."""

import pytest

from experiments.tuning.hypermodel_catalog import DENSE_DEFAULT_SPACE
from experiments.tuning.search_space import validate_search_space
from experiments.tuning.space_values import ConfigurationError, fit_configuration

SPACE = validate_search_space(DENSE_DEFAULT_SPACE)
GOOD = {"num_layers": 2, "units": 64, "activation": "tanh", "dropout": 0.3, "batch_norm": True,
        "optimizer": "sgd", "learning_rate": 0.001, "momentum": 0.5}


def _problems(values: dict) -> list[str]:
    with pytest.raises(ConfigurationError) as caught:
        fit_configuration(SPACE, values)
    return caught.value.problems


def test_a_configuration_of_the_same_space_fits_as_it_is():
    fitted = fit_configuration(SPACE, GOOD)
    assert fitted.values == GOOD and fitted.defaults == [] and fitted.dropped == []


def test_missing_hyperparameters_take_the_spaces_defaults_and_say_so():
    fitted = fit_configuration(SPACE, {"units": 96, "optimizer": "adam", "learning_rate": 0.002})
    assert fitted.values == {"num_layers": 1, "units": 96, "activation": "relu", "dropout": 0.0,
                             "batch_norm": False, "optimizer": "adam", "learning_rate": 0.002}
    assert fitted.defaults == ["num_layers", "activation", "dropout", "batch_norm"]


def test_a_conditional_hyperparameter_follows_its_parent():
    with_sgd = fit_configuration(SPACE, {**GOOD, "momentum": 0.9})
    assert with_sgd.values["momentum"] == 0.9
    without = fit_configuration(SPACE, {**GOOD, "optimizer": "adam"})
    assert "momentum" not in without.values and without.dropped == ["momentum"]
    defaulted = fit_configuration(SPACE, {k: v for k, v in GOOD.items() if k != "momentum"})
    assert defaulted.values["momentum"] == 0.0 and defaulted.defaults == ["momentum"]


def test_hyperband_bookkeeping_is_not_a_hyperparameter():
    fitted = fit_configuration(SPACE, {**GOOD, "tuner/epochs": 3, "tuner/round": 0, "tuner/trial_id": "0002"})
    assert fitted.values == GOOD


@pytest.mark.parametrize(("values", "message"), [
    ({"filters": 32}, "filters is not a hyperparameter of the new search space."),
    ({"units": 300}, "units = 300 is outside the range 32 to 256 by 32."),
    ({"units": 40}, "units = 40 is not one of the values the range 32 to 256 by 32 takes."),
    ({"units": "64"}, "units = '64' has the wrong type: an Int takes whole numbers."),
    ({"units": 64.0}, "units = 64.0 has the wrong type: an Int takes whole numbers."),
    ({"num_layers": True}, "num_layers = true has the wrong type"),
    ({"learning_rate": 0.5}, "learning_rate = 0.5 is outside the range 0.0001 to 0.01."),
    ({"learning_rate": "fast"}, "learning_rate = 'fast' has the wrong type: a Float takes numbers."),
    ({"dropout": 0.25}, "dropout = 0.25 is not one of the values the range 0.0 to 0.5 by 0.1 takes."),
    ({"activation": "elu"}, "activation = 'elu' is not one of the choices 'relu', 'tanh', 'gelu'."),
    ({"activation": 3}, "activation = 3 has the wrong type"),
    ({"batch_norm": "yes"}, "batch_norm = 'yes' has the wrong type: a Boolean takes true or false."),
])
def test_values_the_space_cannot_take_are_refused_with_their_name(values, message):
    problems = _problems({**GOOD, **values})
    assert len(problems) == 1 and message in problems[0]


def test_every_problem_is_reported_at_once():
    problems = _problems({"units": 1, "activation": "elu", "filters": 16, "kernel_size": 3})
    assert len(problems) == 4
    assert [p.split(" ")[0] for p in problems] == ["filters", "kernel_size", "units", "activation"]


def test_floats_on_a_step_allow_for_rounding_and_ints_pass_for_floats():
    assert fit_configuration(SPACE, {**GOOD, "dropout": 0.30000000000000004}).values["dropout"] == 0.30000000000000004
    assert fit_configuration(SPACE, {**GOOD, "dropout": 0}).values["dropout"] == 0.0


def test_a_fixed_value_must_match():
    space = validate_search_space([{"name": "depth", "type": "fixed", "value": 3}])
    assert fit_configuration(space, {"depth": 3}).values == {"depth": 3}
    with pytest.raises(ConfigurationError, match="depth = 4 differs from the space's fixed value 3."):
        fit_configuration(space, {"depth": 4})
