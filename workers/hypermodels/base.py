"""DataInfo: what a hypermodel may know about a dataset, computed once from its training split
(statistics for normalisation layers, the vocabulary for text)."""

from dataclasses import dataclass

import numpy as np

from experiments.tuning.hypermodel_catalog import KINDS

# TextVectorization's adapt keeps this many tokens, the two special ones ('' and '[UNK]')
# included; a study's max_tokens hyperparameter then takes a prefix of them.
VOCABULARY_LIMIT = 20000
# Statistics are computed about this many values at a time (32 MB as float64): a float64
# copy of a whole image dataset would be eight times its uint8 size.
_STATISTICS_CHUNK_VALUES = 4 * 1024 * 1024


def unit_variance_if_constant(variance: np.ndarray) -> np.ndarray:
    """A feature constant on the training rows keeps unit scale, as StandardScaler does, so unseen values are not
    multiplied by up to a million."""
    return np.where(variance > 1e-12, variance, 1.0)


def _mean_and_variance(x: np.ndarray, features: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean and population variance of each of the last `features` columns of x reshaped to
    (-1, features), combined chunk by chunk (Chan et al.) so memory stays bounded and a
    large mean does not cancel the variance away as E[x²] - E[x]² would."""
    rows = x.reshape(len(x), -1, features) if len(x) else x.reshape(0, 1, features)
    step = max(1, _STATISTICS_CHUNK_VALUES // max(int(np.prod(x.shape[1:])), 1))
    count, mean, m2 = 0, np.zeros(features), np.zeros(features)
    for start in range(0, len(rows), step):
        chunk = rows[start:start + step].reshape(-1, features).astype("float64")
        chunk_mean = chunk.mean(axis=0)
        chunk_m2 = ((chunk - chunk_mean) ** 2).sum(axis=0)
        if count == 0:
            count, mean, m2 = len(chunk), chunk_mean, chunk_m2
            continue
        total = count + len(chunk)
        delta = chunk_mean - mean
        mean = mean + delta * len(chunk) / total
        m2 = m2 + chunk_m2 + delta**2 * count * len(chunk) / total
        count = total
    return mean, m2 / max(count, 1)


def text_vocabulary(x_train: np.ndarray) -> tuple[str, ...]:
    """The training split's tokens, most frequent first, as the text hypermodels split them
    (lower case, punctuation stripped, split on whitespace); without '' and '[UNK]', which
    TextVectorization puts back in front when given the list."""
    import keras  # here, not at the top: only text needs it, and the statistics are numpy


    vectorizer = keras.layers.TextVectorization(max_tokens=VOCABULARY_LIMIT, standardize="lower_and_strip_punctuation")
    vectorizer.adapt(np.asarray(x_train, dtype=str))
    return tuple(str(token) for token in vectorizer.get_vocabulary(include_special_tokens=False))


@dataclass(frozen=True)
class DataInfo:
    """What a hypermodel may know about the data (shapes, task, training-split statistics), so preprocessing is part of
    the model and exports take raw input."""

    input_shape: tuple[int, ...]
    task: str  # "classification" | "regression"
    n_classes: int
    feature_mean: np.ndarray
    feature_variance: np.ndarray
    kind: str = "tabular"  # one of KINDS
    vocabulary: tuple[str, ...] = ()  # text only: training-split tokens, most frequent first

    @property
    def is_classification(self) -> bool:
        return self.task == "classification"

    @classmethod
    def from_training_split(cls, x_train: np.ndarray, task: str, n_classes: int, kind: str = "tabular") -> "DataInfo":
        if kind not in KINDS:
            raise ValueError(f"Unknown data kind {kind!r}; expected one of {', '.join(KINDS)}.")
        vocabulary: tuple[str, ...] = ()
        if kind == "text":
            mean = variance = np.zeros(0)
            vocabulary = text_vocabulary(x_train)
        elif kind == "tabular":
            mean, variance = _mean_and_variance(x_train, int(np.prod(x_train.shape[1:], dtype=int)))
        else:  # image: per channel; sequence: per feature, over examples and time steps
            mean, variance = _mean_and_variance(x_train, int(x_train.shape[-1]))
        return cls(
            input_shape=tuple(int(d) for d in x_train.shape[1:]),
            task=task,
            n_classes=n_classes,
            feature_mean=mean.astype("float32"),
            feature_variance=unit_variance_if_constant(variance).astype("float32"),
            kind=kind,
            vocabulary=vocabulary,
        )
