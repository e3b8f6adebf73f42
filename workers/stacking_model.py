"""A stacked ensemble as one Keras model: the members as sub-models on a shared input, their
outputs concatenated (member-major, as workers.stacking.features lays them out) and one
Dense layer holding the meta-learner (softmax for classification, linear for regression).
Built-in layers only (Concatenate, Dense), so `keras.models.load_model` opens it in safe mode
with no custom code, and it exports like any model.

Why probabilities and not log-probabilities as the meta-learner's features: Keras has no
built-in layer that takes a logarithm (Activation offers log_softmax and log_sigmoid, neither
of which is log p given p), and a Lambda or a subclassed layer is custom code that safe mode
refuses. workers/stacking.py measured both on digits; probabilities also did better."""

import keras
import numpy as np

from workers.stacking import Stacker


def stacked_model(members: list, stacker: Stacker, input_shape: tuple, task: str = "classification") -> keras.Model:
    if stacker.feature_kind != "probabilities" and task == "classification":
        raise ValueError("Only a stacker on probabilities can be exported as built-in Keras layers.")
    if len(members) != stacker.members:
        raise ValueError(f"The stacker was fitted on {stacker.members} members, not {len(members)}.")
    # The members' own input type: raw uint8 images and raw strings go in as they are.
    first = members[0].inputs[0]
    inputs = keras.Input(shape=tuple(first.shape[1:]) if first.shape else input_shape, dtype=first.dtype,
                         name="features")
    outputs = []
    for i, member in enumerate(members):
        member.name = f"member_{i}"  # members of one hypermodel share a name; nested models need distinct ones
        outputs.append(member(inputs))
    joined = outputs[0] if len(outputs) == 1 else keras.layers.Concatenate(axis=-1, name="member_outputs")(outputs)
    head = keras.layers.Dense(stacker.outputs, activation="softmax" if task == "classification" else None,
                              dtype="float32", name="meta_learner")
    output = head(joined)
    head.set_weights([np.asarray(stacker.coef.T, dtype="float32"), np.asarray(stacker.intercept, dtype="float32")])
    model = keras.Model(inputs, output, name="stacked_ensemble")
    # Compiled like the single models, so `evaluate` works right after `load_model`.
    if task == "classification":
        model.compile(loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    else:
        model.compile(loss="mse", metrics=["mae"])
    return model
