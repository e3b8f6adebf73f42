"""The built-in hypermodels for images, text and sequences: DataInfo's statistics per kind,
each family building from its catalog space (names and conditions as the builder asks for
them), training a step, and taking raw input (uint8 pixels, strings) with preprocessing
inside the model."""

import keras
import keras_tuner
import numpy as np
import pytest

from experiments.tuning.hypermodel_catalog import BUILTIN
from workers import hypermodels
from workers.hypermodels import base
from workers.hypermodels.base import DataInfo
from workers.tuners.hyperparameters import to_hyperparameters

RNG = np.random.default_rng(0)
IMAGES = RNG.integers(0, 256, size=(64, 8, 8, 1), dtype=np.uint8)
IMAGE_LABELS = np.arange(64) % 3
WORDS = {0: ["good", "great", "fine", "nice"], 1: ["bad", "awful", "poor", "sad"]}
TEXT_LABELS = np.arange(60) % 2
TEXTS = np.array([" ".join(RNG.choice(WORDS[int(label)], 4)) + "!" for label in TEXT_LABELS])
SEQUENCES = RNG.normal(size=(40, 10, 2)).astype("float32")
SEQUENCE_LABELS = (SEQUENCES[:, :, 0].mean(axis=1) > 0).astype("int64")

DATA = {"image": (IMAGES, IMAGE_LABELS, 3), "text": (TEXTS, TEXT_LABELS, 2),
        "sequence": (SEQUENCES, SEQUENCE_LABELS, 2)}


def info_for(kind: str, task: str = "classification") -> DataInfo:
    x, _, n_classes = DATA[kind]
    return DataInfo.from_training_split(x, task, n_classes if task == "classification" else 0, kind=kind)


def as_model_input(x: np.ndarray) -> np.ndarray:
    # Keras 3.15's fit/predict refuse NumPy unicode arrays ("Invalid dtype: str352"); object
    # arrays of str (and tf.data, which the workers use) go in.
    return x.astype(object) if x.dtype.kind == "U" else x


def space_hp(name: str, **fixed) -> keras_tuner.HyperParameters:
    """The catalog's default space as a study would declare it, with some values chosen."""
    hp = to_hyperparameters(BUILTIN[name].default_space)
    for key, value in fixed.items():
        assert key in {p.name for p in hp.space}, f"{key} is not in the {name} space"
        hp.values[key] = value
    for param in hp.space:  # parents first: a child made active by a chosen value gets its default
        if param.name not in hp.values and hp.is_active(param):
            hp.values[param.name] = param.default
    return hp


def train_one_epoch(name: str, hp, kind: str) -> tuple[keras.Model, np.ndarray]:
    x, y, _ = DATA[kind]
    model = hypermodels.build(name, hp, info_for(kind))
    history = model.fit(as_model_input(x), y, epochs=1, batch_size=32, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    return model, model.predict(as_model_input(x[:8]), verbose=0)


def assert_probabilities(model: keras.Model, probabilities: np.ndarray, n_classes: int) -> None:
    assert model.output_names == ["probabilities"]
    assert probabilities.shape == (8, n_classes) and probabilities.dtype == np.float32
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)


# --- DataInfo per kind -----------------------------------------------------------------------


def test_image_statistics_are_per_channel_in_pixel_units():
    images = RNG.integers(0, 256, size=(50, 4, 5, 3), dtype=np.uint8)
    info = DataInfo.from_training_split(images, "classification", 2, kind="image")
    assert info.kind == "image" and info.input_shape == (4, 5, 3)
    flat = images.reshape(-1, 3).astype("float64")
    np.testing.assert_allclose(info.feature_mean, flat.mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(info.feature_variance, flat.var(axis=0), rtol=1e-5)


def test_sequence_statistics_are_per_feature_over_examples_and_time_steps():
    sequences = np.stack([np.full((6, 2), [i, 1000.0]) for i in range(4)]).astype("float32")
    sequences[:, :, 1] += np.linspace(0, 1, 6)
    info = DataInfo.from_training_split(sequences, "regression", 0, kind="sequence")
    assert info.feature_mean.shape == (2,) and info.input_shape == (6, 2)
    assert info.feature_mean[0] == pytest.approx(1.5)
    assert info.feature_variance[0] == pytest.approx(1.25)
    # A large mean must not cancel a small variance away (E[x²] - E[x]² would, in float32).
    assert info.feature_variance[1] == pytest.approx(np.var(np.linspace(0, 1, 6)), rel=1e-4)


def test_statistics_summed_chunk_by_chunk_equal_those_of_the_whole_array(monkeypatch):
    monkeypatch.setattr(base, "_STATISTICS_CHUNK_VALUES", 50)  # 7 images of 3x3x2 per chunk
    images = RNG.integers(0, 256, size=(40, 3, 3, 2), dtype=np.uint8)
    info = DataInfo.from_training_split(images, "classification", 2, kind="image")
    flat = images.reshape(-1, 2).astype("float64")
    np.testing.assert_allclose(info.feature_mean, flat.mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(info.feature_variance, flat.var(axis=0), rtol=1e-6)


def test_a_constant_channel_keeps_unit_scale():
    images = np.zeros((10, 3, 3, 2), dtype=np.uint8)
    images[..., 1] = RNG.integers(0, 256, size=(10, 3, 3))
    info = DataInfo.from_training_split(images, "classification", 2, kind="image")
    assert info.feature_variance[0] == 1.0 and info.feature_variance[1] > 1.0


def test_text_vocabulary_is_the_training_tokens_most_frequent_first():
    texts = np.array(["Cat sat.", "the cat!", "THE CAT, the dog; cat"])
    info = DataInfo.from_training_split(texts, "classification", 2, kind="text")
    assert info.vocabulary[:2] == ("cat", "the")  # lower-cased, punctuation stripped, by count
    assert set(info.vocabulary) == {"cat", "the", "sat", "dog"}
    assert "" not in info.vocabulary and "[UNK]" not in info.vocabulary
    assert info.feature_mean.shape == (0,) and info.input_shape == ()


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="Unknown data kind 'video'"):
        DataInfo.from_training_split(IMAGES, "classification", 3, kind="video")


# --- Default spaces match the builders --------------------------------------------------------


class RecordingHyperParameters(keras_tuner.HyperParameters):
    """Remembers each (name, conditions) a builder asks for."""

    asked: set

    def _retrieve(self, hp):
        self.asked.add((hp.name, tuple((c.name, tuple(c.values)) for c in hp.conditions)))
        return super()._retrieve(hp)


def recording(name: str, **fixed) -> RecordingHyperParameters:
    chosen = space_hp(name, **fixed)
    hp = RecordingHyperParameters.from_config(chosen.get_config())
    hp.values = dict(chosen.values)
    hp.asked = set()
    return hp


BRANCHES = {  # values that, together, make each builder ask for every row of its space
    "dense": [{"optimizer": "sgd"}],
    "cnn": [{"optimizer": "sgd", "flip": True, "rotation": 0.1, "zoom": 0.1}],
    "text": [{"encoder": "conv1d", "optimizer": "sgd"}, {"encoder": "bilstm"}, {"encoder": "transformer"}],
    "sequence": [{"layer_type": "lstm", "optimizer": "sgd"}, {"layer_type": "conv1d"}],
    "resnet": [{"optimizer": "sgd", "dropout": 0.2}],
    "xception": [{"optimizer": "sgd", "dropout": 0.2}],
}
KIND_OF = {"dense": "image", "cnn": "image", "text": "text", "sequence": "sequence", "resnet": "image",
           "xception": "image"}


@pytest.mark.parametrize("name", sorted(BRANCHES))
def test_each_default_space_names_exactly_what_its_builder_asks_for(name):
    asked, declared_count = set(), len(BUILTIN[name].default_space)
    for values in BRANCHES[name]:
        hp = recording(name, **values)
        hypermodels.build(name, hp, info_for(KIND_OF[name]))
        # A name asked for under other conditions than its row's would be a second, new entry.
        assert len(hp.space) == declared_count, [p.name for p in hp.space]
        asked |= hp.asked
    declared = {(row["name"], ((row["parent"], tuple(row["parent_values"])),) if row["parent"] else ())
                for row in BUILTIN[name].default_space}
    assert asked == declared


# --- Each family trains on its kind -----------------------------------------------------------


CONFIGURATIONS = [
    ("cnn", "image", {}),
    ("cnn", "image", {"blocks": 3, "batch_norm": True, "pooling": "avg", "head": "flatten", "dropout": 0.2,
                      "flip": True, "rotation": 0.1, "zoom": 0.1, "kernel_size": 5}),
    ("dense", "image", {}),
    ("dense", "sequence", {"optimizer": "sgd", "momentum": 0.5}),
    ("text", "text", {}),
    ("text", "text", {"encoder": "bilstm", "pooling": "max", "dropout": 0.1, "sequence_length": 32}),
    ("text", "text", {"encoder": "transformer", "num_heads": 4, "embedding_dim": 32, "sequence_length": 32}),
    ("sequence", "sequence", {}),
    ("sequence", "sequence", {"layer_type": "gru", "bidirectional": True, "num_layers": 2, "dropout": 0.2}),
    ("sequence", "sequence", {"layer_type": "conv1d", "kernel_size": 5, "num_layers": 2}),
]


@pytest.mark.parametrize(("name", "kind", "values"), CONFIGURATIONS,
                         ids=[f"{n}-{k}-{i}" for i, (n, k, _) in enumerate(CONFIGURATIONS)])
def test_each_family_trains_on_its_kind_and_predicts_probabilities(name, kind, values):
    model, probabilities = train_one_epoch(name, space_hp(name, **values), kind)
    assert_probabilities(model, probabilities, DATA[kind][2])


def test_image_models_take_raw_uint8_pixels_and_text_models_raw_strings():
    for name, kind, dtype in [("cnn", "image", "uint8"), ("dense", "image", "uint8"), ("text", "text", "string"),
                              ("sequence", "sequence", "float32")]:
        model = hypermodels.build(name, space_hp(name), info_for(kind))
        assert model.inputs[0].dtype == dtype, name
    assert any(isinstance(layer, keras.layers.Rescaling) for layer in
               hypermodels.build("cnn", space_hp("cnn"), info_for("image")).layers)


def test_the_cnn_keeps_at_least_a_2x2_map_on_8x8_images():
    model = hypermodels.build("cnn", space_hp("cnn", blocks=3), info_for("image"))
    pools = [layer for layer in model.layers if layer.name.startswith("pool_")]
    assert [p.name for p in pools] == ["pool_0", "pool_1"]  # the third block convolves the 2x2 map
    assert tuple(model.get_layer("conv_2").output.shape[1:3]) == (2, 2)


def test_augmentation_is_random_in_training_and_absent_at_inference():
    hp = space_hp("cnn", flip=True, rotation=0.2, zoom=0.2, dropout=0.0, batch_norm=False)
    model = hypermodels.build("cnn", hp, info_for("image"))
    assert {"random_flip", "random_rotation", "random_zoom"} <= {layer.name for layer in model.layers}
    x = IMAGES[:16]
    first, second = model.predict(x, verbose=0), model.predict(x, verbose=0)
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(np.asarray(model(x, training=False)), first, atol=1e-6)
    assert not np.allclose(np.asarray(model(x, training=True)), first, atol=1e-6)


def test_the_text_model_uses_the_training_vocabulary_and_is_never_adapted_again():
    train, unseen = np.array(["good good fine", "bad sad"]), np.array(["wonderful good"])
    info = DataInfo.from_training_split(train, "classification", 2, kind="text")
    hp = space_hp("text")
    hp.values["max_tokens"] = 3  # the 3 most frequent: good, then two of the single ones
    vectorise = hypermodels.build("text", hp, info).get_layer("vectorise")
    assert vectorise.get_vocabulary() == ["", "[UNK]", *info.vocabulary[:3]]
    assert vectorise.get_vocabulary()[2] == "good"
    tokens = np.asarray(vectorise(unseen.astype(object)))[0]
    assert tokens[0] == 1 and tokens[1] == 2  # "wonderful" only appears outside training: [UNK]


def test_a_text_dataset_without_words_gets_a_clear_error():
    info = DataInfo.from_training_split(np.array(["!!!", "?"]), "classification", 2, kind="text")
    with pytest.raises(hypermodels.text.EmptyVocabulary, match="contain no words"):
        hypermodels.build("text", space_hp("text"), info)


def test_regression_ends_in_one_float32_prediction():
    x, _, _ = DATA["sequence"]
    y = x[:, :, 0].mean(axis=1)
    model = hypermodels.build("sequence", space_hp("sequence"), info_for("sequence", task="regression"))
    assert model.output_names == ["prediction"] and model.loss == "mse"
    model.fit(x, y, epochs=1, batch_size=32, verbose=0)
    assert model.predict(x[:4], verbose=0).shape == (4, 1)


def test_outputs_stay_float32_under_a_mixed_precision_policy():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        models = [hypermodels.build(name, space_hp(name), info_for(kind))
                  for name, kind in [("cnn", "image"), ("text", "text"), ("sequence", "sequence")]]
    finally:
        keras.mixed_precision.set_global_policy("float32")
    for model in models:
        assert model.get_layer("probabilities").compute_dtype == "float32"
        assert model.outputs[0].dtype == "float32"
        assert any(layer.compute_dtype == "bfloat16" for layer in model.layers), model.name


def test_a_family_refuses_another_kind_of_data_in_words_a_person_reads():
    with pytest.raises(hypermodels.WrongKindOfData) as caught:
        hypermodels.build("text", space_hp("text"), info_for("image"))
    assert str(caught.value) == "The text hypermodel takes text; this dataset holds images."


def team_image_model(hp, data):
    inputs = keras.Input(data.input_shape, dtype="uint8")
    outputs = keras.layers.Dense(data.n_classes, activation="softmax")(keras.layers.Flatten()(inputs))
    model = keras.Model(inputs, outputs)
    model.compile(loss="sparse_categorical_crossentropy")
    return model


def test_a_team_hypermodel_declared_for_images_resolves_without_its_suffix(settings):
    settings.HYPERMODELS = [f"vit={__name__}:team_image_model@image"]
    assert hypermodels.resolve("vit") is team_image_model
    model = hypermodels.build("vit", keras_tuner.HyperParameters(), info_for("image"))
    assert model.inputs[0].dtype == "uint8"
    with pytest.raises(hypermodels.WrongKindOfData, match="takes images; this dataset holds sequences"):
        hypermodels.build("vit", keras_tuner.HyperParameters(), info_for("sequence"))


def test_a_team_hypermodel_without_kinds_is_not_given_images(settings):
    settings.HYPERMODELS = [f"mlp={__name__}:team_image_model"]
    with pytest.raises(hypermodels.WrongKindOfData, match="takes tabular features; this dataset holds images"):
        hypermodels.build("mlp", keras_tuner.HyperParameters(), info_for("image"))


# --- KerasTuner's application hypermodels -----------------------------------------------------


@pytest.mark.parametrize(("name", "values"), [("xception", {}), ("resnet", {"version": "v2"})])
def test_application_hypermodels_take_small_raw_images_and_train_a_step(name, values):
    # One graph-mode step each, the way a worker trains: ResNet50 v2 (the smallest ResNet of
    # the space, KerasTuner's default version) costs ~15 s of tracing on two cores.
    model = hypermodels.build(name, space_hp(name, **values), info_for("image"))
    assert model.inputs[0].dtype == "uint8"
    assert tuple(model.get_layer("enlarge").output.shape[1:]) == (32, 32, 1)  # 8x8 digits, enlarged
    x, y = IMAGES[:16], IMAGE_LABELS[:16]
    before = [w.copy() for w in model.get_weights()]
    history = model.fit(x, y, epochs=1, batch_size=16, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    changed = sum(not np.array_equal(a, b) for a, b in zip(before, model.get_weights(), strict=True))
    assert changed > len(before) // 2
    probabilities = np.asarray(model(x[:8], training=False))
    assert_probabilities(model, probabilities, 3)
