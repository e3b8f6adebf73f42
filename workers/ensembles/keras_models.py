"""An ensemble as one Keras model of built-in layers only, so it loads in safe mode with no custom code and
exports like any model."""

import keras
import numpy as np

from workers.ensembles.stacking import EPSILON, Stacker

LOG_EPSILON = float(np.log(EPSILON))


def _shared_input(members: list, input_shape: tuple):
    """The members' own input type: raw uint8 images and raw strings go in as they are."""
    first = members[0].inputs[0]
    return keras.Input(shape=tuple(first.shape[1:]) if first.shape else input_shape, dtype=first.dtype,
                       name="features")


def _compiled(model: keras.Model, task: str) -> keras.Model:
    """Compiled like the single models, so `evaluate` works right after `load_model`."""
    if task == "classification":
        model.compile(loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    else:
        model.compile(loss="mse", metrics=["mae"])
    return model


def weighted_average_model(members: list, weights: list[float], input_shape: tuple,
                           task: str = "classification", positions: list[int] | None = None) -> keras.Model:
    """`positions`: each member's place in the ensemble's member list, for layer names that
    match the report's rows when members without weight were left out."""
    inputs = _shared_input(members, input_shape)
    outputs = []
    positions = list(range(len(members))) if positions is None else positions
    for i, member, weight in zip(positions, members, weights, strict=True):
        if weight <= 0:
            continue  # a member greedy selection never picked adds nothing
        # Members of one hypermodel share a name; nested models need distinct ones.
        member.name = f"member_{i}"
        outputs.append(keras.layers.Rescaling(float(weight), name=f"weight_{i}")(member(inputs)))
    output = outputs[0] if len(outputs) == 1 else keras.layers.Add(name="weighted_average")(outputs)
    model = keras.Model(inputs, output, name="ensemble")
    return _compiled(model, task)


def has_softmax_head(member) -> bool:
    """Whether the member ends in a Dense softmax layer (every Tuneboard hypermodel does), so
    its log-probabilities can be computed with built-in layers."""
    last = member.layers[-1] if member.layers else None
    return (isinstance(last, keras.layers.Dense) and getattr(last.activation, "__name__", "") == "softmax"
            and len(member.outputs) == 1 and member.outputs[0] is last.output)


def _log_probabilities(member, i: int, inputs):
    """log(clip(member(inputs), EPSILON, 1)) from built-in layers only, exact above the floor, so the saved model needs
    no custom code."""
    head = member.layers[-1]
    body = keras.Model(member.inputs, head.input, name=f"member_{i}")
    logits_layer = keras.layers.Dense(head.units, dtype="float32", name=f"member_{i}_logits")
    logits = logits_layer(body(inputs))
    logits_layer.set_weights(head.get_weights())
    log_p = keras.layers.Activation("log_softmax", dtype="float32", name=f"member_{i}_log_probabilities")(logits)
    below = keras.layers.Rescaling(-1.0, offset=LOG_EPSILON, name=f"member_{i}_below_floor")(log_p)
    lift = keras.layers.ReLU(name=f"member_{i}_lift")(below)
    return keras.layers.Add(name=f"member_{i}_clipped")([log_p, lift])


def stacked_model(members: list, stacker: Stacker, input_shape: tuple, task: str = "classification") -> keras.Model:
    log_features = task == "classification" and stacker.feature_kind == "log_probabilities"
    if log_features and not all(has_softmax_head(m) for m in members):
        raise ValueError("A stacker on log-probabilities needs members that end in a Dense softmax layer.")
    if len(members) != stacker.members:
        raise ValueError(f"The stacker was fitted on {stacker.members} members, not {len(members)}.")
    inputs = _shared_input(members, input_shape)
    outputs = []
    for i, member in enumerate(members):
        if log_features:
            outputs.append(_log_probabilities(member, i, inputs))
            continue
        member.name = f"member_{i}"  # members of one hypermodel share a name; nested models need distinct ones
        outputs.append(member(inputs))
    joined = outputs[0] if len(outputs) == 1 else keras.layers.Concatenate(axis=-1, name="member_outputs")(outputs)
    head = keras.layers.Dense(stacker.outputs, activation="softmax" if task == "classification" else None,
                              dtype="float32", name="meta_learner")
    output = head(joined)
    head.set_weights([np.asarray(stacker.coef.T, dtype="float32"), np.asarray(stacker.intercept, dtype="float32")])
    model = keras.Model(inputs, output, name="stacked_ensemble")
    return _compiled(model, task)
