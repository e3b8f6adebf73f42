"""The correlation cap of an ensemble recipe: a candidate is kept only when it correlates at most `cap` with every
member kept so far; the best is always kept, since the cap buys diversity."""

import numpy as np


def pairwise_correlation(a: np.ndarray, b: np.ndarray) -> float:
    x, y = np.ravel(a).astype("float64"), np.ravel(b).astype("float64")
    if x.shape != y.shape:
        raise ValueError(f"predictions of different shapes: {a.shape} and {b.shape}")
    if np.std(x) == 0 or np.std(y) == 0:
        return 1.0 if np.allclose(x, y) else 0.0
    return float(np.corrcoef(x, y)[0, 1])


def correlation_pick(keys: list[str], predictions: dict[str, np.ndarray], cap: float | None
                     ) -> tuple[list[str], dict[str, tuple[str, float]]]:
    """`keys` best first; `predictions[key]` its validation predictions (a key without them is
    kept: nothing says it is too alike). Returns the kept keys, in order, and for each key left
    out the kept key it was too alike to and their correlation."""
    kept: list[str] = []
    dropped: dict[str, tuple[str, float]] = {}
    for key in keys:
        if cap is not None and key in predictions:
            for other in kept:
                if other not in predictions:
                    continue
                r = pairwise_correlation(predictions[key], predictions[other])
                if r > cap:
                    dropped[key] = (other, round(r, 4))
                    break
        if key not in dropped:
            kept.append(key)
    return kept, dropped
