"""The statistics a hypermodel normalises with: a feature constant on the training rows
keeps unit scale, so a value it takes later (test split, production) cannot explode."""

import numpy as np

from workers.hypermodels.base import DataInfo


def test_constant_features_keep_unit_scale_and_others_their_variance():
    x = np.array([[0.0, 1.0, 5.0], [0.0, 3.0, 5.0], [0.0, 5.0, 5.0]], dtype="float32")
    info = DataInfo.from_training_split(x, "classification", 2)
    assert info.feature_variance.tolist() == [1.0, np.float32(np.var([1.0, 3.0, 5.0])), 1.0]
    assert info.feature_mean.tolist() == [0.0, 3.0, 5.0]


def test_a_value_never_seen_in_training_stays_on_the_scale_of_the_others():
    import keras

    x = np.zeros((4, 2), dtype="float32")
    x[:, 1] = [1, 2, 3, 4]
    info = DataInfo.from_training_split(x, "classification", 2)
    layer = keras.layers.Normalization(mean=info.feature_mean, variance=info.feature_variance)
    out = np.asarray(layer(np.array([[16.0, 2.5]], dtype="float32")))
    assert np.all(np.abs(out) <= 16.0)  # was 1.6e7 with a 1e-12 variance floor
