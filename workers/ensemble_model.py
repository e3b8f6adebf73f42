"""An ensemble as one Keras model: the members as sub-models on a shared input, each output
scaled by its fixed weight and summed. Built from built-in layers only (Rescaling, Add), so
`keras.models.load_model` opens it with no custom code, and it exports like any model."""

import keras


def weighted_average_model(members: list, weights: list[float], input_shape: tuple,
                           task: str = "classification", positions: list[int] | None = None) -> keras.Model:
    """`positions`: each member's place in the ensemble's member list, for layer names that
    match the report's rows when members without weight were left out."""
    # The members' own input type: raw uint8 images and raw strings go in as they are.
    first = members[0].inputs[0]
    inputs = keras.Input(shape=tuple(first.shape[1:]) if first.shape else input_shape, dtype=first.dtype,
                         name="features")
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
    # Compiled like the single models, so `evaluate` works right after `load_model`.
    if task == "classification":
        model.compile(loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    else:
        model.compile(loss="mse", metrics=["mae"])
    return model
