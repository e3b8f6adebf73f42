"""The bundled image, text and sequence datasets: offline, fast, byte-for-byte reproducible,
learnable, and not trivially so."""

import io
import json
import time

import numpy as np
import pytest
from sklearn import datasets
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_score
from sklearn.tree import DecisionTreeClassifier

from experiments.datasets.bundled import BUNDLED, BUNDLED_KINDS, load_bundled
from experiments.datasets.splits import split_indices


def test_every_bundled_dataset_has_a_description_and_a_kind_and_the_old_ones_come_first():
    assert list(BUNDLED) == list(BUNDLED_KINDS)
    assert list(BUNDLED)[:4] == ["digits", "wine", "iris", "breast_cancer"]
    assert BUNDLED_KINDS == {
        "digits": "tabular",
        "wine": "tabular",
        "iris": "tabular",
        "breast_cancer": "tabular",
        "digits_images": "image",
        "reviews": "text",
        "waves": "sequence",
    }
    assert all(BUNDLED.values())


@pytest.mark.parametrize("name", list(BUNDLED_KINDS))
def test_each_bundled_dataset_is_its_kind_reproducible_fast_and_storable(name):
    started = time.perf_counter()
    parsed = load_bundled(name)
    assert time.perf_counter() - started < 1.0
    again = load_bundled(name)
    assert parsed.kind == BUNDLED_KINDS[name]
    assert parsed.x.tobytes() == again.x.tobytes() and parsed.y.tobytes() == again.y.tobytes()
    assert parsed.x.dtype == again.x.dtype and parsed.details == again.details
    buffer = io.BytesIO()
    np.savez(buffer, x=parsed.x, y=parsed.y)
    stored = np.load(io.BytesIO(buffer.getvalue()), allow_pickle=False)
    assert np.array_equal(stored["x"], parsed.x)
    assert len(parsed.preview(3)) == 3 and parsed.n_features >= 1
    json.dumps({"details": parsed.details, "preview": parsed.preview(3)})  # stored in JSON fields
    parts = split_indices(parsed, val_fraction=0.15, test_fraction=0.15, seed=0)
    assert sum(len(part) for part in parts) == parsed.n_rows


def test_digits_images_are_the_scikit_learn_digits_scaled_to_bytes():
    parsed = load_bundled("digits_images")
    assert parsed.x.shape == (1797, 8, 8, 1) and parsed.x.dtype == np.uint8
    assert parsed.classes == [str(d) for d in range(10)]
    source = datasets.load_digits()
    assert np.array_equal(parsed.x[..., 0], np.round(source.images * 255 / 16).astype(np.uint8))
    assert parsed.x.max() == 255 and parsed.y.tolist() == source.target.tolist()
    assert parsed.preview(1) == [{"image": "8×8×1", "label": "0"}]
    assert parsed.details["color_mode"] == "grayscale" and parsed.details["image_size"] == [8, 8]


def test_reviews_are_short_texts_in_three_classes():
    parsed = load_bundled("reviews")
    assert parsed.x.shape == (600,) and parsed.x.dtype.kind == "U"
    assert parsed.classes == ["negative", "neutral", "positive"]
    assert all(150 <= count <= 250 for count in parsed.class_counts.values())
    assert parsed.details["text_column"] == "review" and 5 <= parsed.details["mean_words"] <= 30
    assert len(set(parsed.x.tolist())) > 500  # generated, not a few texts repeated


def test_reviews_can_be_learnt_but_not_from_one_word_and_not_perfectly():
    parsed = load_bundled("reviews")
    words = CountVectorizer().fit_transform(parsed.x)
    bag_of_words = cross_val_score(LogisticRegression(max_iter=2000), words, parsed.y, cv=3).mean()
    one_word = cross_val_score(DecisionTreeClassifier(max_depth=1), words, parsed.y, cv=3).mean()
    assert 0.7 < bag_of_words < 0.97  # label noise and mixed reviews keep it below 100 %
    assert one_word < 0.5


def test_waves_are_balanced_sequences_of_three_shapes():
    parsed = load_bundled("waves")
    assert parsed.x.shape == (600, 40, 2) and parsed.x.dtype == np.float32
    assert np.isfinite(parsed.x).all() and not parsed.time_ordered
    assert parsed.class_counts == {"sawtooth": 200, "sine": 200, "square": 200}
    assert parsed.feature_names == ["signal", "trend"]
    assert parsed.preview(1)[0]["sequence"] == "40×2"
    # A square wave sits near its two levels, a sine and a sawtooth pass through the middle:
    # the share of steps near the series' mean tells the shapes apart on average.
    signal = parsed.x[..., 0]
    near_middle = (np.abs(signal - signal.mean(axis=1, keepdims=True)) < 0.3 * signal.std(axis=1, keepdims=True))
    share = {name: near_middle[parsed.y == i].mean() for i, name in enumerate(parsed.classes)}
    assert share["square"] < share["sine"] and share["square"] < share["sawtooth"]
