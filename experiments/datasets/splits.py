"""Cutting a parsed dataset into training, validation and test rows, once, with a seed."""

from __future__ import annotations

import numpy as np
from sklearn.model_selection import train_test_split

from experiments.datasets.core import DatasetError, ParsedDataset, rows_text


def split_indices(
    parsed: ParsedDataset, *, val_fraction: float, test_fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted (train, val, test) row indices, stratified when every class allows it; a time-ordered dataset is cut in
    time order so the model is judged on a later period."""
    for label, fraction in (("validation", val_fraction), ("test", test_fraction)):
        if not 0 < fraction < 1:
            raise DatasetError(
                f"The {label} fraction must be between 0 and 1 (exclusive), got {fraction}."
            )
    if val_fraction + test_fraction >= 1:
        raise DatasetError(
            f"The validation ({val_fraction}) and test ({test_fraction}) fractions add up to "
            f"{val_fraction + test_fraction:g}; they must add up to less than 1 so rows are "
            "left for training."
        )

    gap = 0
    if parsed.time_ordered and "window" in parsed.details:
        gap = int(parsed.details["window"]) + int(parsed.details.get("horizon", 1)) - 1

    def sizes(n: int) -> tuple[int, int]:
        return max(1, round(n * val_fraction)), max(1, round(n * test_fraction))

    n = parsed.n_rows
    n_val, n_test = sizes(n)
    n_train = n - n_val - n_test - 2 * gap
    if n_train < 1:
        need = next((m for m in range(3, 10_000_000) if m - sum(sizes(m)) - 2 * gap >= 1), None)
        if gap:
            raise DatasetError(
                f"The series gives {n} windows, but a time-ordered split with {val_fraction:.0%} "
                f"validation and {test_fraction:.0%} test needs at least {need or 'far more'}: "
                f"the {gap} windows before the validation block and the {gap} before the test "
                "block are left out so that no time step is in two parts, and training, "
                "validation and test must each keep at least one window. Use a longer series, "
                "a smaller window or horizon, or smaller fractions."
            )
        raise DatasetError(
            f"The dataset has {rows_text(n)}, but a split with {val_fraction:.0%} validation and "
            f"{test_fraction:.0%} test needs at least {need or 'far more'} rows: training, "
            "validation and test must each get at least one row."
        )

    if parsed.time_ordered:
        val_start = n_train + gap
        test_start = val_start + n_val + gap
        return (
            np.arange(n_train, dtype=np.int64),
            np.arange(val_start, val_start + n_val, dtype=np.int64),
            np.arange(test_start, n, dtype=np.int64),
        )

    labels = parsed.y if parsed.task == "classification" else None
    rest, test = _split(np.arange(n), labels, n_test, seed)
    train, val = _split(rest, None if labels is None else labels[rest], n_val, seed)
    return np.sort(train), np.sort(val), np.sort(test)


def _split(
    indices: np.ndarray, labels: np.ndarray | None, n_out: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """(kept, taken) where taken has n_out of the indices."""
    options = {"test_size": n_out, "random_state": seed % 2**32}  # sklearn needs [0, 2**32)
    if labels is not None:
        try:
            kept, taken = train_test_split(indices, stratify=labels, **options)
            return kept, taken
        except ValueError:
            pass  # a class has too few rows to appear on both sides
    kept, taken = train_test_split(indices, **options)
    return kept, taken
