"""The datasets Tuneboard ships with: offline, fast, and the same bytes on every call, so a dataset made from one
splits alike years apart (docs/design/datasets-and-models.md)."""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np
from sklearn import datasets

from experiments.datasets.core import DatasetError, ParsedDataset
from experiments.datasets.text_reader import text_details

BUNDLED: dict[str, str] = {
    "digits": "Handwritten digits: 1,797 8×8 grayscale images as 64 pixel values, 10 classes.",
    "wine": "Wine recognition: 178 wines, 13 chemical measurements, 3 grape cultivars.",
    "iris": "Iris flowers: 150 flowers, 4 petal and sepal measurements, 3 species.",
    "breast_cancer": "Breast cancer (Wisconsin): 569 tumours, 30 measurements, malignant or benign.",
    "digits_images": "Handwritten digits as images: 1,797 8×8 grayscale images, 10 classes.",
    "reviews": "Product reviews (synthetic): 600 short reviews, negative, neutral or positive.",
    "waves": "Wave shapes (synthetic): 600 series of 40 time steps × 2 features; sine, square or sawtooth.",
}
BUNDLED_KINDS: dict[str, str] = {
    "digits": "tabular",
    "wine": "tabular",
    "iris": "tabular",
    "breast_cancer": "tabular",
    "digits_images": "image",
    "reviews": "text",
    "waves": "sequence",
}


def load_bundled(name: str) -> ParsedDataset:
    if name not in _LOADERS:
        raise DatasetError(f"There is no bundled dataset named {name!r}. Choose one of: {', '.join(BUNDLED)}.")
    return _LOADERS[name]()


def _scikit_learn(loader: Callable) -> Callable[[], ParsedDataset]:
    def load() -> ParsedDataset:
        bunch = loader()
        return ParsedDataset(
            x=bunch.data.astype(np.float32),
            y=bunch.target.astype(np.int64),
            feature_names=[str(f) for f in bunch.feature_names],
            task="classification",
            classes=[str(c) for c in bunch.target_names],
        )

    return load


def _digits_images() -> ParsedDataset:
    bunch = datasets.load_digits()
    images = np.round(bunch.images * (255 / 16)).astype(np.uint8)[..., np.newaxis]
    return ParsedDataset(
        x=images,
        y=bunch.target.astype(np.int64),
        feature_names=[],
        task="classification",
        classes=[str(c) for c in bunch.target_names],
        target_name="label",
        kind="image",
        details={"source_format": "bundled", "image_size": [8, 8], "color_mode": "grayscale"},
    )


# --- reviews ------------------------------------------------------------------------------

_REVIEW_CLASSES = ["negative", "neutral", "positive"]
_PRODUCTS = [
    "headphones", "blender", "backpack", "phone case", "coffee maker", "desk lamp",
    "charger", "water bottle", "keyboard", "tent", "jacket", "kettle",
]  # fmt: skip
_SENTENCES = {
    "negative": [
        "The {p} broke after a week.", "Terrible quality.", "Stopped working after two days.",
        "I want a refund.", "Very disappointed with this {p}.", "Cheap plastic that feels flimsy.",
        "Would not recommend it.", "Returned it the same day.", "A waste of money.",
        "The {p} arrived damaged.", "Not great at all.", "Worse than my old {p}.",
    ],
    "neutral": [
        "The {p} is okay.", "It does the job.", "Nothing special, but it works.",
        "Average quality for the price.", "It is fine, I guess.", "Not bad, not great.",
        "Does what it says.", "The colour is a bit different from the photo.",
        "It is smaller than I expected.", "About what you would expect for a {p}.",
        "Some things are good, some are not.", "Works, but the instructions are confusing.",
    ],
    "positive": [
        "I love this {p}.", "The {p} works great.", "Excellent quality for the price.",
        "Arrived quickly and works perfectly.", "Would definitely buy again.",
        "The {p} exceeded my expectations.", "Really happy with it.",
        "Sturdy, well made and easy to use.", "Five stars.", "Not bad at all, I love it.",
        "Better than my old {p}.", "My whole family loves it.",
    ],
}  # fmt: skip
_FILLERS = [
    "I bought it last month.", "Ordered this as a gift.", "The box was plain.", "I use it every day.",
    "Got it on sale.", "This is my second {p}.", "Delivery took about a week.", "Setup took ten minutes.",
]  # fmt: skip
_OPENERS = ["Honestly,", "Overall,", "Well,", "So,"]


def _reviews() -> ParsedDataset:
    rng = random.Random(20240917)
    texts: list[str] = []
    labels: list[int] = []
    for label in [k % 3 for k in range(600)]:
        product = rng.choice(_PRODUCTS)
        sentences = rng.sample(_SENTENCES[_REVIEW_CLASSES[label]], rng.choice((1, 2)))
        if rng.random() < 0.3:
            other = rng.choice([c for c in _REVIEW_CLASSES if c != _REVIEW_CLASSES[label]])
            sentences.append(rng.choice(_SENTENCES[other]))
        if rng.random() < 0.5:
            sentences.append(rng.choice(_FILLERS))
        rng.shuffle(sentences)
        text = " ".join(sentences).replace("{p}", product)
        if rng.random() < 0.25:
            text = f"{rng.choice(_OPENERS)} {text[0].lower()}{text[1:]}"
        if rng.random() < 0.06:
            label = rng.choice([k for k in range(3) if k != label])
        texts.append(text)
        labels.append(label)
    order = list(range(len(texts)))
    rng.shuffle(order)
    x = np.asarray([texts[i] for i in order], dtype=str)
    words = [len(text.split()) for text in texts]
    return ParsedDataset(
        x=x,
        y=np.asarray([labels[i] for i in order], dtype=np.int64),
        feature_names=["review"],
        task="classification",
        classes=list(_REVIEW_CLASSES),
        target_name="sentiment",
        kind="text",
        details=text_details("review", words=sum(words), most_words=max(words), n=len(words)),
    )


# --- waves --------------------------------------------------------------------------------

_WAVE_CLASSES = ["sawtooth", "sine", "square"]


def _waves(n_per_class: int = 200, steps: int = 40) -> ParsedDataset:
    rng = np.random.default_rng(20240917)
    n = n_per_class * len(_WAVE_CLASSES)
    y = rng.permutation(np.repeat(np.arange(len(_WAVE_CLASSES)), n_per_class))
    t = np.arange(steps)
    cycles = rng.uniform(1.5, 4.0, size=(n, 1)) / steps  # cycles per step
    phase = rng.uniform(0, 1, size=(n, 1))  # in cycles
    amplitude = rng.uniform(0.5, 1.5, size=(n, 1))
    position = cycles * t + phase
    shapes = {
        "sawtooth": 2 * (position % 1) - 1,
        "sine": np.sin(2 * np.pi * position),
        "square": np.where(position % 1 < 0.5, 1.0, -1.0),
    }
    clean = np.choose(y[:, np.newaxis], [shapes[name] for name in _WAVE_CLASSES])
    signal = amplitude * clean + rng.normal(0, 0.25, size=(n, steps))
    trend = rng.normal(0, 1, size=(n, 1)) + rng.uniform(-0.05, 0.05, size=(n, 1)) * t
    trend = trend + rng.normal(0, 0.1, size=(n, steps))
    return ParsedDataset(
        x=np.stack([signal, trend], axis=-1).astype(np.float32),
        y=y.astype(np.int64),
        feature_names=["signal", "trend"],
        task="classification",
        classes=list(_WAVE_CLASSES),
        target_name="shape",
        kind="sequence",
        details={"timesteps": steps, "features": 2, "source_format": "bundled"},
    )


_LOADERS: dict[str, Callable[[], ParsedDataset]] = {
    "digits": _scikit_learn(datasets.load_digits),
    "wine": _scikit_learn(datasets.load_wine),
    "iris": _scikit_learn(datasets.load_iris),
    "breast_cancer": _scikit_learn(datasets.load_breast_cancer),
    "digits_images": _digits_images,
    "reviews": _reviews,
    "waves": _waves,
}
