"""Stacking's meta-learner (workers/ensembles/stacking.py): its L2 strength is chosen by K-fold
cross-validation on the validation predictions alone (fit_stacking takes no test rows),
the chosen strength is the CV table's argmin, and on a seeded case of diverse members the
stacker beats the mean and the best member on validation CV. Ridge for regression."""

import inspect

import numpy as np
import pytest

from workers.ensembles import blending
from workers.ensembles.stacking import STRENGTHS, StackingError, fit_stacking, loss


def diverse_members(seed: int = 0, rows: int = 600, classes: int = 4):
    """Three members, each reliable on a different subset of the classes and uniform elsewhere:
    no mixture of them is right everywhere, but a meta-learner reading which member is
    confident is."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, rows)
    predictions = np.full((3, rows, classes), 1.0 / classes)
    for member, known in enumerate(([0, 1], [1, 2], [2, 3])):
        for row in np.flatnonzero(np.isin(y, known)):
            p = rng.dirichlet(np.ones(classes) * 0.5) * 0.3
            p[y[row]] += 0.7
            predictions[member, row] = p / p.sum()
        noise = np.flatnonzero(~np.isin(y, known))
        predictions[member, noise] = rng.dirichlet(np.ones(classes) * 3, len(noise))
    return predictions, y


def test_fit_stacking_has_no_test_argument():
    parameters = set(inspect.signature(fit_stacking).parameters)
    assert parameters == {"predictions", "y", "task", "folds", "seed", "strengths", "feature_kind"}


def test_the_strength_is_the_argmin_of_a_cv_table_over_the_grid():
    predictions, y = diverse_members()
    stacker = fit_stacking(predictions, y, "classification", seed=1)
    assert set(stacker.cv) == set(STRENGTHS)
    assert stacker.strength == min(stacker.cv, key=stacker.cv.get)
    assert stacker.folds == 5 and stacker.coef.shape == (4, 3 * 4) and stacker.intercept.shape == (4,)
    report = stacker.as_report()
    assert [row["strength"] for row in report["cv"]] == sorted(STRENGTHS)
    assert len(report["member_coef_norms"]) == 3 and abs(sum(report["member_shares"]) - 1) < 1e-9
    # "auto" tried both feature kinds on the same folds and kept the lower CV loss.
    assert set(stacker.features_cv) == {"probabilities", "log_probabilities"}
    assert stacker.feature_kind == min(stacker.features_cv, key=stacker.features_cv.get)
    assert report["features_cv"] == stacker.features_cv
    # The same rows, the same folds, the same choice.
    assert fit_stacking(predictions, y, "classification", seed=1).cv == stacker.cv


def test_the_choice_depends_on_the_validation_rows_only():
    """Test rows whose labels would favour another strength change nothing: the stacker fitted
    on the validation rows is the same object whatever the test split holds, since
    fit_stacking never receives it; fitting on validation + those test rows would choose
    differently."""
    predictions, y = diverse_members(seed=2, rows=400)
    chosen = fit_stacking(predictions, y, "classification", feature_kind="probabilities").strength
    # "Test" rows where every member's confident class is wrong: a choice informed by them
    # prefers a much stronger penalty (a flatter meta-learner).
    test_predictions, test_y = diverse_members(seed=3, rows=400)
    test_y = (test_y + 1) % 4
    leaked = fit_stacking(np.concatenate([predictions, test_predictions], axis=1), np.concatenate([y, test_y]),
                          "classification", feature_kind="probabilities").strength
    assert leaked != chosen
    assert fit_stacking(predictions, y, "classification", feature_kind="probabilities").strength == chosen


def test_on_diverse_members_stacking_beats_the_mean_and_the_best_member_on_cv():
    predictions, y = diverse_members(seed=4)
    stacker = fit_stacking(predictions, y, "classification")
    mean_loss = loss(predictions.mean(axis=0), y, "classification")
    nelder_mead = blending.fit_nelder_mead(predictions, y, "classification").val_loss
    assert stacker.beats_best_member_on_cv
    assert stacker.cv_loss < stacker.cv_best_member_loss < 1.3
    assert stacker.cv_loss < mean_loss and stacker.cv_loss < nelder_mead  # even out of sample vs in-sample weights
    assert stacker.val_loss <= stacker.cv_loss + 0.05  # the in-sample refit
    probabilities = stacker.predict(predictions)
    assert np.allclose(probabilities.sum(axis=1), 1.0)


def test_a_useless_extra_member_is_reported_when_stacking_loses_on_cv():
    """The guard: a lone good member plus pure noise, few rows. The stacker is still returned;
    the report says whether it beat the best member on CV."""
    rng = np.random.default_rng(7)
    y = rng.integers(0, 3, 60)
    good = np.full((60, 3), 0.05)
    good[np.arange(60), y] = 0.9
    noise = rng.dirichlet(np.ones(3), 60)
    stacker = fit_stacking(np.stack([good, noise]), y, "classification")
    report = stacker.as_report()
    assert report["cv_best_member_loss"] == pytest.approx(loss(good, y, "classification"))
    assert report["beats_best_member_on_cv"] == (stacker.cv_loss < stacker.cv_best_member_loss)


def test_binary_members_with_two_softmax_columns():
    rng = np.random.default_rng(8)
    y = rng.integers(0, 2, 300)
    p1 = np.clip(y * 0.7 + rng.normal(0.15, 0.2, 300), 0.01, 0.99)
    p2 = np.clip(y * 0.5 + rng.normal(0.25, 0.25, 300), 0.01, 0.99)
    predictions = np.stack([np.stack([1 - p, p], axis=1) for p in (p1, p2)])
    stacker = fit_stacking(predictions, y, "classification")
    assert stacker.coef.shape == (2, 4) and np.all(stacker.coef[0] == 0)
    out = stacker.predict(predictions)
    assert out.shape == (300, 2) and np.allclose(out.sum(axis=1), 1)
    assert stacker.val_loss < min(loss(p, y, "classification") for p in predictions)


def test_regression_uses_ridge_and_recovers_a_linear_combination():
    rng = np.random.default_rng(9)
    y = rng.normal(size=500)
    a = y + rng.normal(0, 0.5, 500)
    b = y + rng.normal(0, 0.5, 500)
    stacker = fit_stacking(np.stack([a, b])[:, :, None], y, "regression")
    assert stacker.as_report()["kind"] == "ridge" and set(stacker.cv) == set(STRENGTHS)
    # The best weights are each 1 / (2 + noise variance 0.25) = 0.44.
    assert stacker.coef.shape == (1, 2) and np.allclose(stacker.coef, 0.44, atol=0.06)
    assert stacker.cv_loss < stacker.cv_best_member_loss
    assert stacker.predict(np.stack([a, b])[:, :, None]).shape == (500, 1)


def test_refusals():
    with pytest.raises(StackingError, match="one class"):
        fit_stacking(np.full((2, 10, 2), 0.5), np.zeros(10), "classification")
    with pytest.raises(StackingError, match="at least 2"):
        fit_stacking(np.full((2, 11, 2), 0.5), np.array([0] * 10 + [1]), "classification")
    with pytest.raises(StackingError, match="NaN"):
        fit_stacking(np.full((2, 10, 2), np.nan), np.arange(10) % 2, "classification")
