"""The built-in `text` family: TextVectorization adapted once (never per trial), an embedding, then a conv1d, BiLSTM
or Transformer encoder, built-in layers only so .keras files open anywhere."""

import keras

from experiments.errors import TuneboardError
from workers.hypermodels.base import DataInfo
from workers.hypermodels.compiling import compile_for_task, task_output

ENCODERS = ["conv1d", "bilstm", "transformer"]


class EmptyVocabulary(TuneboardError, ValueError):
    pass


def _vectorizer(hp, data: DataInfo, length: int) -> keras.layers.TextVectorization:
    if not data.vocabulary:
        raise EmptyVocabulary("The training texts contain no words, so a text model has nothing to learn from.")
    max_tokens = hp.Int("max_tokens", 1000, 20000, sampling="log", default=10000)
    return keras.layers.TextVectorization(
        standardize="lower_and_strip_punctuation",
        vocabulary=list(data.vocabulary[:max_tokens]),
        output_mode="int",
        output_sequence_length=length,
        name="vectorise",
    )


def _position_embedding(x, length: int, width: int):
    # A learned vector per position, added to each token's embedding: EinsumDense's bias
    # over (position, feature) is exactly that, and its kernel starts as the identity so the
    # token embeddings pass through unchanged. A built-in layer, unlike the usual custom one.
    return keras.layers.EinsumDense("btd,de->bte", output_shape=(length, width), bias_axes="te",
                                    kernel_initializer="identity", name="position_embedding")(x)


def _transformer_block(hp, x, width: int, dropout: float):
    with hp.conditional_scope("encoder", ["transformer"]):
        heads = hp.Choice("num_heads", [2, 4], default=2)
        feed_forward = hp.Int("ff_dim", 32, 256, step=32, default=64)
    attention = keras.layers.MultiHeadAttention(heads, key_dim=max(width // heads, 8), dropout=dropout,
                                                name="attention")(x, x)
    x = keras.layers.LayerNormalization(name="attention_norm")(keras.layers.Add()([x, attention]))
    y = keras.layers.Dense(feed_forward, activation="relu", name="feed_forward_in")(x)
    y = keras.layers.Dense(width, name="feed_forward_out")(y)
    if dropout > 0:
        y = keras.layers.Dropout(dropout)(y)
    return keras.layers.LayerNormalization(name="feed_forward_norm")(keras.layers.Add()([x, y]))


def _encode(hp, x, encoder: str, width: int, dropout: float):
    if encoder == "conv1d":
        with hp.conditional_scope("encoder", ["conv1d"]):
            filters = hp.Int("conv_filters", 32, 256, step=32, default=64)
            kernel_size = hp.Choice("conv_kernel_size", [3, 5, 7], default=5)
        return keras.layers.Conv1D(filters, kernel_size, padding="same", activation="relu", name="conv")(x)
    if encoder == "bilstm":
        with hp.conditional_scope("encoder", ["bilstm"]):
            units = hp.Int("lstm_units", 16, 128, step=16, default=32)
        return keras.layers.Bidirectional(keras.layers.LSTM(units, return_sequences=True), name="bilstm")(x)
    return _transformer_block(hp, x, width, dropout)


def build_text(hp, data: DataInfo) -> keras.Model:
    length = hp.Choice("sequence_length", [32, 64, 128, 256], default=64)
    vectorise = _vectorizer(hp, data, length)
    inputs = keras.Input(shape=(), dtype="string", name="texts")
    width = hp.Int("embedding_dim", 16, 128, step=16, default=64)
    encoder = hp.Choice("encoder", ENCODERS)
    dropout = hp.Float("dropout", 0.0, 0.5, step=0.1, default=0.0)
    x = keras.layers.Embedding(vectorise.vocabulary_size(), width, name="embedding")(vectorise(inputs))
    if encoder == "transformer":
        x = _position_embedding(x, length, width)
    x = _encode(hp, x, encoder, width, dropout)
    if hp.Choice("pooling", ["average", "max"]) == "max":
        x = keras.layers.GlobalMaxPooling1D()(x)
    else:
        x = keras.layers.GlobalAveragePooling1D()(x)
    if dropout > 0:
        x = keras.layers.Dropout(dropout)(x)
    model = keras.Model(inputs, task_output(x, data), name="text")
    return compile_for_task(model, hp, data)
