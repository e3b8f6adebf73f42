"""Stacking: a small regularised meta-learner on the members' outputs, fitted on validation rows only with its
strength chosen by cross-validation (docs/design/datasets-and-models.md)."""

import warnings
from dataclasses import dataclass, field

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import KFold, StratifiedKFold

from experiments.errors import TuneboardError

EPSILON = 1e-15  # as workers.ensembles.blending: probabilities are clipped before a logarithm
# The L2 strength: 1/C for LogisticRegression (whose loss is a sum over rows), alpha for Ridge.
STRENGTHS = (0.001, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)
FEATURES = "auto"
FEATURE_KINDS = ("probabilities", "log_probabilities")
# A class the validation rows never show gets no coefficients and this intercept: the
# meta-learner has no evidence for it, so it predicts it with probability ~e^-30 relative.
ABSENT_CLASS_INTERCEPT = -30.0


class StackingError(TuneboardError, ValueError):
    """The meta-learner cannot be fitted (e.g. one class only); str(exc) is shown."""


def features(predictions: np.ndarray, task: str, kind: str) -> np.ndarray:
    """(members, rows, outputs) -> (rows, members * outputs), member-major: member 0's
    outputs first, as keras.layers.Concatenate lays out the members' outputs."""
    predictions = np.asarray(predictions, dtype="float64")
    if task == "classification" and kind == "log_probabilities":
        predictions = np.log(np.clip(predictions, EPSILON, 1.0))
    members, rows, outputs = predictions.shape
    return predictions.transpose(1, 0, 2).reshape(rows, members * outputs)


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def loss(predicted: np.ndarray, y: np.ndarray, task: str) -> float:
    """Log loss (classification) or mean squared error (regression), as workers.ensembles.blending."""
    if task == "classification":
        p_true = predicted[np.arange(len(y)), y.astype(int)]
        return float(-np.mean(np.log(np.clip(p_true, EPSILON, 1.0))))
    return float(np.mean((predicted[:, 0] - y) ** 2))


@dataclass
class Stacker:
    task: str
    feature_kind: str
    strength: float
    coef: np.ndarray  # (outputs, members * outputs)
    intercept: np.ndarray  # (outputs,)
    members: int
    outputs: int
    cv: dict = field(default_factory=dict)  # {strength: mean CV loss}
    cv_member_losses: list = field(default_factory=list)  # each member's own loss on the same folds
    folds: int = 0
    features_cv: dict = field(default_factory=dict)  # {feature kind: its best CV loss}, when "auto" tried both
    val_loss: float = float("nan")  # the refit on all validation rows, in-sample

    @property
    def cv_loss(self) -> float:
        return self.cv[self.strength]

    @property
    def cv_best_member_loss(self) -> float:
        return float(min(self.cv_member_losses))

    @property
    def beats_best_member_on_cv(self) -> bool:
        return self.cv_loss < self.cv_best_member_loss

    def predict(self, predictions: np.ndarray) -> np.ndarray:
        """(members, rows, outputs) -> (rows, outputs): probabilities or values. Computed
        here, not by scikit-learn, with the same formula the exported Dense layer applies."""
        z = features(predictions, self.task, self.feature_kind) @ self.coef.T + self.intercept
        return _softmax(z) if self.task == "classification" else z

    def member_norms(self) -> list[float]:
        """The L2 norm of each member's block of coefficients: how much the meta-learner uses it."""
        blocks = self.coef.reshape(self.outputs, self.members, -1)
        return [float(np.linalg.norm(blocks[:, i, :])) for i in range(self.members)]

    def member_shares(self) -> list[float]:
        """Each member's share of the coefficients' L2 norms (summing to 1): the "weight" the
        page shows for a stacked member. Not a mixing weight, as a stacker has none."""
        norms = np.array(self.member_norms())
        total = norms.sum()
        return (norms / total if total > 0 else np.full(self.members, 1.0 / self.members)).tolist()

    def as_report(self) -> dict:
        return {
            "kind": "logistic_regression" if self.task == "classification" else "ridge",
            "penalty": "l2",
            "features": self.feature_kind,
            "features_cv": dict(self.features_cv),
            "strength": self.strength,
            "folds": self.folds,
            "cv": [{"strength": s, "loss": v} for s, v in sorted(self.cv.items())],
            "cv_loss": self.cv_loss,
            "cv_member_losses": list(self.cv_member_losses),
            "cv_best_member_loss": self.cv_best_member_loss,
            "beats_best_member_on_cv": bool(self.beats_best_member_on_cv),
            "val_loss_in_sample": self.val_loss,
            "member_coef_norms": self.member_norms(),
            "member_shares": self.member_shares(),
            "intercept": [float(b) for b in self.intercept],
        }


def _splits(y: np.ndarray, task: str, folds: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Stratified folds: by class, or for regression by quantile bin of the target. Fewer
    folds when the rarest class (or the rows) cannot fill them."""
    rows = len(y)
    if task == "classification":
        _, counts = np.unique(y.astype(int), return_counts=True)
        folds = min(folds, int(counts.min()))
        strata = y.astype(int)
    else:
        folds = min(folds, rows // 2)
        edges = np.quantile(y, np.linspace(0, 1, folds + 1)[1:-1])
        strata = np.digitize(y, edges)
        if np.unique(strata, return_counts=True)[1].min() < folds:
            strata = None
    if folds < 2:
        raise StackingError("Too few validation rows (or too few of some class) to cross-validate a stacker: "
                            "each class needs at least 2 validation rows.")
    x_dummy = np.zeros((rows, 1))
    if strata is None:
        return list(KFold(folds, shuffle=True, random_state=seed).split(x_dummy))
    return list(StratifiedKFold(folds, shuffle=True, random_state=seed).split(x_dummy, strata))


def _fit_once(x: np.ndarray, y: np.ndarray, task: str, strength: float, outputs: int) -> tuple[np.ndarray, np.ndarray]:
    """(coef (outputs, features), intercept (outputs,)) in the softmax / linear form Stacker uses."""
    if task == "regression":
        model = Ridge(alpha=strength).fit(x, y.reshape(len(y), -1))
        return np.atleast_2d(model.coef_), np.atleast_1d(model.intercept_).astype("float64")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = LogisticRegression(C=1.0 / strength, max_iter=500, tol=1e-4).fit(x, y.astype(int))
    classes = model.classes_.astype(int)
    coef = np.zeros((outputs, x.shape[1]))
    intercept = np.full(outputs, ABSENT_CLASS_INTERCEPT)
    if len(classes) == 2:
        # scikit-learn fits one vector for two classes: p(second) = sigmoid(w.x + b), which is
        # softmax([0, w.x + b]) over the two.
        coef[classes[1]], intercept[classes[0]], intercept[classes[1]] = model.coef_[0], 0.0, model.intercept_[0]
    else:
        coef[classes], intercept[classes] = model.coef_, model.intercept_
    return coef, intercept


def _fit_kind(predictions: np.ndarray, y: np.ndarray, task: str, splits, strengths: tuple,
              feature_kind: str, member_losses: list) -> Stacker:
    members, _, outputs = predictions.shape
    x = features(predictions, task, feature_kind)
    cv = {}
    for strength in strengths:
        losses = []
        for train, held_out in splits:
            coef, intercept = _fit_once(x[train], y[train], task, strength, outputs)
            z = x[held_out] @ coef.T + intercept
            losses.append(loss(_softmax(z) if task == "classification" else z, y[held_out], task))
        cv[strength] = float(np.mean(losses))
    # Ties go to the stronger penalty: the simpler meta-learner.
    chosen = min(strengths, key=lambda s: (cv[s], -s))
    coef, intercept = _fit_once(x, y, task, chosen, outputs)
    stacker = Stacker(task=task, feature_kind=feature_kind, strength=chosen, coef=coef, intercept=intercept,
                      members=members, outputs=outputs, cv=cv, cv_member_losses=member_losses, folds=len(splits))
    stacker.val_loss = loss(stacker.predict(predictions), y, task)
    return stacker


def fit_stacking(predictions: np.ndarray, y: np.ndarray, task: str, *, folds: int = 5, seed: int = 0,
                 strengths=STRENGTHS, feature_kind: str = FEATURES) -> Stacker:
    """Chooses the L2 strength (and, with feature_kind "auto", the features) by K-fold CV on
    these (validation) rows, then refits on all of them."""
    predictions = np.asarray(predictions, dtype="float64")
    if task == "regression" and predictions.ndim == 2:
        predictions = predictions[:, :, None]
    members, rows, outputs = predictions.shape
    y = np.asarray(y)
    if len(y) != rows:
        raise StackingError(f"{rows} rows of predictions but {len(y)} targets.")
    if not np.all(np.isfinite(predictions)):
        raise StackingError("Member predictions hold NaN or infinite values.")
    if task == "classification" and len(np.unique(y)) < 2:
        raise StackingError("The validation rows hold one class only; a stacker cannot be fitted.")
    if feature_kind not in (*FEATURE_KINDS, "auto"):
        raise ValueError(f"Unknown feature kind {feature_kind!r}; choose auto or one of {', '.join(FEATURE_KINDS)}.")
    kinds = FEATURE_KINDS if feature_kind == "auto" and task == "classification" else (feature_kind,)
    if task == "regression":
        kinds = ("values",)
    strengths = tuple(float(s) for s in strengths)
    splits = _splits(y, task, folds, seed)
    member_losses = [float(np.mean([loss(predictions[i][held_out], y[held_out], task) for _, held_out in splits]))
                     for i in range(members)]
    # The same folds for every kind and strength, so their CV losses compare like with like.
    fitted = [_fit_kind(predictions, y, task, splits, strengths, kind, member_losses) for kind in kinds]
    best = min(fitted, key=lambda stacker: stacker.cv_loss)
    best.features_cv = {stacker.feature_kind: stacker.cv_loss for stacker in fitted}
    return best
