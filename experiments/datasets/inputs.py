"""Inputs without labels, to predict with a trained model: read by the model's dataset-kind readers and checked
against what the model was trained on before anything is stored."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np

from experiments.datasets.core import DEFAULT_LIMITS, DatasetError, DatasetLimits, binary_file
from experiments.datasets.image_reader import parse_image_zip
from experiments.datasets.parsing import parse_npz
from experiments.datasets.tabular_reader import parse_csv_inputs
from experiments.datasets.text_reader import parse_text_csv

_COLOR_MODES = {1: "grayscale", 3: "rgb", 4: "rgba"}
# What each kind of model takes, as the message refusing another file says it.
_ACCEPTED = {
    "tabular": ((".csv", ".npz"), "a .csv file whose header names the model's features, or an .npz with an array x"),
    "image": ((".zip", ".npz"), "a .zip of images (.png, .jpg, …) or an .npz with an array x of uint8 images"),
    "text": ((".csv",), "a .csv file with one column of texts under a header line"),
    "sequence": ((".npz",), "an .npz with an array x of sequences (n, steps, features)"),
}


@dataclass(frozen=True)
class ModelInputSpec:
    """What a model was trained on: its dataset's kind, feature names and input shape per row."""

    kind: str
    input_shape: list[int]
    feature_names: list[str] = field(default_factory=list)


@dataclass
class ModelInputs:
    """The parsed inputs, x as the dataset's own x would be; names: each image's file in a zip."""

    x: np.ndarray
    names: list[str] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return int(self.x.shape[0])


def _shape(dims) -> str:
    return "×".join(str(int(d)) for d in dims)


def parse_model_inputs(filename: str, data: bytes | BinaryIO, *, spec: ModelInputSpec,
                       limits: DatasetLimits = DEFAULT_LIMITS) -> ModelInputs:
    """The upload's rows as the model takes them; DatasetError (its text shown as is) otherwise."""
    extensions, what = _ACCEPTED[spec.kind]
    lower = filename.lower()
    if not lower.endswith(extensions):
        raise DatasetError(f"This model takes {spec.kind} inputs: upload {what}.")
    file = binary_file(data)
    names: list[str] = []
    if lower.endswith(".npz"):
        x = parse_npz(file, kind=spec.kind, labelled=False, limits=limits).x
    elif spec.kind == "tabular":
        x = parse_csv_inputs(file, features=spec.feature_names, limits=limits)
    elif spec.kind == "text":
        x = parse_text_csv(file, text_column=spec.feature_names[0], target_column=None, limits=limits).x
    else:
        height, width, channels = spec.input_shape
        parsed = parse_image_zip(file, image_size=(height, width), color_mode=_COLOR_MODES[channels],
                                 labelled=False, limits=limits)
        x, names = parsed.x, parsed.details["files"]
    if spec.kind != "text" and list(x.shape[1:]) != list(spec.input_shape):
        noun = {"image": "images", "sequence": "sequences"}.get(spec.kind, "rows of values")
        raise DatasetError(f"The inputs are {noun} of {_shape(x.shape[1:])}, but the model takes {noun} of "
                           f"{_shape(spec.input_shape)} (expected {_shape(spec.input_shape)}, "
                           f"got {_shape(x.shape[1:])}).")
    return ModelInputs(x=x, names=names)
