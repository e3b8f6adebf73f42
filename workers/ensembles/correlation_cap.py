"""An ensemble recipe's correlation cap, applied on the worker before the weights are fitted: a member too
correlated with a better one gets weight 0."""

from dataclasses import dataclass, field

import numpy as np

from experiments.ensembling.diversity import correlation_pick


@dataclass
class Cap:
    size: int
    kept: list[int]
    cap: float | None = None
    reasons: dict[str, str] = field(default_factory=dict)  # label -> "too alike to X (r=0.99)"

    def spread(self, weights: np.ndarray) -> np.ndarray:
        """The fitted weights of the kept members at their positions, 0 for the dropped."""
        full = np.zeros(self.size)
        full[self.kept] = weights
        return full

    def method(self, method: str) -> str:
        return method if len(self.kept) > 1 else "mean"  # one member left: its weight is 1, nothing to fit

    def report(self) -> dict:
        return {"correlation_cap": self.cap, "dropped_reasons": self.reasons} if self.cap is not None else {}


def correlation_cap(report: dict | None, val: np.ndarray, labels: list[str]) -> Cap:
    """`val`: the members' stacked validation predictions (members first), `labels` theirs."""
    cap = (report or {}).get("correlation_cap")
    if cap is None:
        return Cap(size=len(labels), kept=list(range(len(labels))))
    keys = [str(i) for i in range(len(labels))]
    kept, dropped = correlation_pick(keys, {key: val[i] for i, key in enumerate(keys)}, float(cap))
    reasons = {labels[int(key)]: f"too alike to {labels[int(other)]} (r={r:.2f})"
               for key, (other, r) in dropped.items()}
    return Cap(size=len(labels), kept=[int(key) for key in kept], cap=float(cap), reasons=reasons)
