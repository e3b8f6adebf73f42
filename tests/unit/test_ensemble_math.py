"""Ensemble weights on validation predictions: Nelder–Mead finds better-than-mean weights
and starves a weak member, greedy selection is repeatable for a seed, NaN is refused."""

import numpy as np
import pytest

from workers.ensembles import blending

ROWS, CLASSES = 2000, 3


def _member(rng, y, skill: float) -> np.ndarray:
    """Probabilities that put `skill` (plus noise) on the true class."""
    logits = rng.normal(size=(len(y), CLASSES))
    logits[np.arange(len(y)), y] += skill
    exp = np.exp(logits - logits.max(axis=1, keepdims=True))
    return exp / exp.sum(axis=1, keepdims=True)


@pytest.fixture
def three_members():
    rng = np.random.default_rng(0)
    y = rng.integers(0, CLASSES, ROWS)
    predictions = np.stack([_member(rng, y, 3.0), _member(rng, y, 3.0), _member(rng, y, 0.2)])
    return predictions, y


def _val_loss(predictions, y, weights):
    return blending.metrics(blending.blend(predictions, weights), y, "classification")["log_loss"]


def test_nelder_mead_starves_the_weak_member_and_beats_the_mean_and_the_best_member(three_members):
    predictions, y = three_members
    fit = blending.fit_nelder_mead(predictions, y, "classification")
    assert np.all(fit.weights >= 0) and fit.weights.sum() == pytest.approx(1.0)
    assert np.argmin(fit.weights) == 2
    mean = _val_loss(predictions, y, np.full(3, 1 / 3))
    best_member = min(_val_loss(predictions, y, np.eye(3)[i]) for i in range(3))
    assert fit.val_loss <= mean and fit.val_loss < best_member  # two equally good, independent members
    assert fit.val_loss == pytest.approx(_val_loss(predictions, y, fit.weights))


def test_when_one_member_is_best_alone_nelder_mead_returns_exactly_it():
    rng = np.random.default_rng(0)
    y = rng.integers(0, CLASSES, ROWS)
    predictions = np.stack([_member(rng, y, 3.0), _member(rng, y, 2.5), _member(rng, y, 0.2)])
    fit = blending.fit_nelder_mead(predictions, y, "classification")
    assert fit.weights.tolist() == [1.0, 0.0, 0.0]
    assert fit.val_loss == _val_loss(predictions, y, np.eye(3)[0])


def test_greedy_selection_is_repeatable_for_a_seed_and_prefers_strong_members(three_members):
    predictions, y = three_members
    first = blending.fit_greedy(predictions, y, "classification", rounds=30, seed=4)
    again = blending.fit_greedy(predictions, y, "classification", rounds=30, seed=4)
    assert np.array_equal(first.weights, again.weights)
    assert first.weights.sum() == pytest.approx(1.0)
    assert np.all(np.isclose(first.weights * 30, np.round(first.weights * 30)))  # counts of picks
    assert first.weights[2] < first.weights[0]


def test_greedy_ties_go_by_the_seeded_order():
    y = np.zeros(10, dtype=int)
    identical = np.stack([np.tile([0.6, 0.4], (10, 1))] * 3)
    picks = {int(np.argmax(blending.fit_greedy(identical, y, "classification", rounds=1, seed=s).weights))
             for s in range(10)}
    assert len(picks) > 1, "different seeds break ties differently"


def test_regression_uses_mean_squared_error():
    rng = np.random.default_rng(1)
    y = rng.normal(size=500)
    members = np.stack([(y + rng.normal(scale=s, size=500))[:, None] for s in (0.1, 0.3, 2.0)])
    fit = blending.fit_nelder_mead(members, y, "regression")
    assert np.argmin(fit.weights) == 2
    assert fit.val_loss < np.mean((members[0, :, 0] - y) ** 2)
    assert set(blending.metrics(members[0], y, "regression")) == {"mse", "mae"}


def test_nan_predictions_are_refused_with_a_reason(three_members):
    predictions, y = three_members
    predictions = predictions.copy()
    predictions[1, 5, :] = np.nan
    with pytest.raises(blending.EnsembleFitError, match="NaN"):
        blending.fit_nelder_mead(predictions, y, "classification")
    with pytest.raises(blending.EnsembleFitError, match="NaN"):
        blending.fit_greedy(predictions, y, "classification")


def test_the_correlation_matrix_shows_identical_members_as_one(three_members):
    predictions, _ = three_members
    matrix = blending.correlation(np.concatenate([predictions, predictions[:1]]))
    assert matrix.shape == (4, 4)
    assert matrix[0, 3] == pytest.approx(1.0) and np.allclose(np.diag(matrix), 1.0)
    assert matrix[0, 2] < 0.9
