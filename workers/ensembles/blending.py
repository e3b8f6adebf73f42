"""Ensemble weights from validation predictions (mean, Nelder–Mead, greedy selection, stacking), pure numpy/scipy
so it runs without Keras or the ORM."""

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from experiments.errors import TuneboardError
from workers.ensembles.stacking import Stacker, StackingError, fit_stacking

EPSILON = 1e-15
METHODS = ("mean", "nelder_mead", "greedy", "stacking")


class EnsembleFitError(TuneboardError, ValueError):
    """The weights cannot be trusted (e.g. the optimiser returned NaN); str(exc) is shown."""


@dataclass
class Fit:
    weights: np.ndarray  # (members,), non-negative, summing to 1
    val_loss: float
    evaluations: int
    # Stacking only: the meta-learner. Its `weights` are then each member's share of the
    # coefficients' L2 norm, for the page; predictions come from stacker.predict, not blend.
    stacker: Stacker | None = None


def _loss_inputs(predictions: np.ndarray, y: np.ndarray, task: str) -> np.ndarray:
    """What the loss needs of each member: (members, rows)."""
    if task == "classification":
        return predictions[:, np.arange(len(y)), y.astype(int)]
    return predictions[:, :, 0]


def _loss(blended: np.ndarray, y: np.ndarray, task: str) -> float:
    if task == "classification":
        return float(-np.mean(np.log(np.clip(blended, EPSILON, 1.0))))
    return float(np.mean((blended - y) ** 2))


def _normalise(raw: np.ndarray) -> np.ndarray:
    weights = np.abs(raw)
    total = weights.sum()
    return weights / total if total > 0 else np.full_like(weights, 1.0 / len(weights))


def fit_mean(predictions: np.ndarray, y: np.ndarray, task: str) -> Fit:
    m = len(predictions)
    weights = np.full(m, 1.0 / m)
    return Fit(weights, _loss(weights @ _loss_inputs(predictions, y, task), y, task), 1)


def fit_nelder_mead(predictions: np.ndarray, y: np.ndarray, task: str, *, max_evaluations: int | None = None) -> Fit:
    """scipy's Nelder–Mead from equal weights; weights are |w| / sum |w|, so the search is
    unconstrained and every point it tries is a valid convex combination."""
    inputs = _loss_inputs(predictions, y, task)
    m = len(inputs)
    # The search evaluates the loss thousands of times: float32 halves each evaluation's cost;
    # the losses it returns are recomputed in float64.
    fast_inputs, fast_y = inputs.astype("float32"), y.astype("float32") if task == "regression" else y

    def objective(raw):
        return _loss(_normalise(raw).astype("float32") @ fast_inputs, fast_y, task)

    start = np.full(m, 1.0 / m)
    # scipy's default first simplex moves each weight by 5%, a step so small in tens of
    # dimensions that the budget runs out near the mean; vertices that each give one member
    # ~4/(m+3) of the weight let the search reach far better mixtures (measured in
    # benchmarks.ensembles).
    simplex = np.vstack([start, start + np.eye(m) * 3.0 / m])
    result = minimize(objective, start, method="Nelder-Mead",
                      options={"maxfev": max_evaluations or 250 * m, "xatol": 1e-5, "fatol": 1e-9,
                               "adaptive": m > 5, "initial_simplex": simplex})
    weights = _normalise(result.x)
    if not np.all(np.isfinite(weights)) or not np.isfinite(result.fun):
        raise EnsembleFitError("Nelder–Mead returned NaN weights; the members' validation predictions may hold "
                               "NaN or infinite values.")
    # The simplex only approaches the corners of the weight space; when one member alone is
    # best, take that corner exactly. So the result is never worse than the mean or any member.
    candidates = [Fit(weights, _loss(weights @ inputs, y, task), int(result.nfev)), fit_mean(predictions, y, task)]
    candidates += [Fit(corner, _loss(corner @ inputs, y, task), 1) for corner in np.eye(m)]
    best = min(candidates, key=lambda fit: fit.val_loss)
    return Fit(best.weights, best.val_loss, int(result.nfev) + m + 1)


def fit_greedy(predictions: np.ndarray, y: np.ndarray, task: str, *, rounds: int = 50, seed: int = 0) -> Fit:
    """Caruana's forward selection with replacement: each round adds the member that lowers
    the validation loss of the running average most; weights are how often each was picked.
    Ties go to the earlier member of a seeded permutation, so a seed fixes the result."""
    inputs = _loss_inputs(predictions, y, task)
    m = len(inputs)
    order = np.random.default_rng(seed).permutation(m)
    counts = np.zeros(m, dtype=int)
    total = np.zeros(inputs.shape[1])
    for picked in range(rounds):
        candidates = (total + inputs[order]) / (picked + 1)
        if task == "classification":
            losses = -np.mean(np.log(np.clip(candidates, EPSILON, 1.0)), axis=1)
        else:
            losses = np.mean((candidates - y) ** 2, axis=1)
        if not np.all(np.isfinite(losses)):
            raise EnsembleFitError("Greedy selection met NaN losses; a member's predictions hold NaN or infinite "
                                   "values.")
        best = order[int(np.argmin(losses))]
        counts[best] += 1
        total += inputs[best]
    weights = counts / counts.sum()
    return Fit(weights, _loss(weights @ inputs, y, task), rounds * m)


# A member whose weight is below this changes no output by more than 1e-4 of its range, yet
# costs a whole model's size and inference time in every exported format: it is left out.
NEGLIGIBLE_WEIGHT = 1e-4


def without_negligible(weights: np.ndarray) -> np.ndarray:
    """The weights with those below NEGLIGIBLE_WEIGHT set to exactly 0 and the rest scaled to
    sum to 1 again. Nelder–Mead's |w| / sum |w| approaches a corner but rarely reaches it, so a
    starved member keeps a weight like 1e-9 that would otherwise ship it."""
    kept = np.where(weights >= NEGLIGIBLE_WEIGHT, weights, 0.0)
    total = kept.sum()
    return kept / total if total > 0 else weights


def blend(predictions: np.ndarray, weights: np.ndarray) -> np.ndarray:
    return np.tensordot(weights, predictions, axes=1)


def metrics(predicted: np.ndarray, y: np.ndarray, task: str) -> dict:
    """The ensemble page's metrics for one split."""
    if task == "classification":
        p_true = predicted[np.arange(len(y)), y.astype(int)]
        return {"log_loss": float(-np.mean(np.log(np.clip(p_true, EPSILON, 1.0)))),
                "accuracy": float(np.mean(predicted.argmax(axis=1) == y))}
    error = predicted[:, 0] - y
    return {"mse": float(np.mean(error**2)), "mae": float(np.mean(np.abs(error)))}


def correlation(predictions: np.ndarray) -> np.ndarray:
    """Pearson correlation of the members' flattened predictions: diversity at a glance."""
    flat = predictions.reshape(len(predictions), -1)
    with np.errstate(invalid="ignore", divide="ignore"):
        matrix = np.corrcoef(flat)
    return np.nan_to_num(matrix, nan=0.0)


def fit(method: str, predictions: np.ndarray, y: np.ndarray, task: str, *, rounds: int = 50, seed: int = 0,
        stacking_features: str = "auto") -> Fit:
    if method == "mean":
        return fit_mean(predictions, y, task)
    if method == "nelder_mead":
        return fit_nelder_mead(predictions, y, task)
    if method == "greedy":
        return fit_greedy(predictions, y, task, rounds=rounds, seed=seed)
    if method == "stacking":
        try:
            stacker = fit_stacking(predictions, y, task, seed=seed, feature_kind=stacking_features)
        except StackingError as exc:
            raise EnsembleFitError(str(exc)) from exc
        return Fit(np.array(stacker.member_shares()), stacker.val_loss, len(stacker.cv) * stacker.folds + 1, stacker)
    raise ValueError(f"Unknown ensemble method {method!r}; choose one of {', '.join(METHODS)}.")
