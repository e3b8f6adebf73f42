"""The hypermodels a study can use as the web sees them (names, data kinds, default spaces), so the web never
imports the model code that needs TensorFlow."""

from dataclasses import dataclass, field

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

# The same kinds as experiments/datasets/core.KINDS (a test keeps them equal); not
# imported from there because that module brings NumPy along.
KINDS = ("tabular", "image", "text", "sequence")
_KIND_NOUNS = {"tabular": "tabular features", "image": "images", "text": "text", "sequence": "sequences"}


def _row(name: str, type_: str, **spec) -> dict:
    return {"name": name, "type": type_, "parent": None, "parent_values": [], **spec}


def _when(row: dict, parent: str, values: list) -> dict:
    return {**row, "parent": parent, "parent_values": values}


# workers/hypermodels/compiling.optimizer: every built-in ends with these.
OPTIMIZER_ROWS = [
    _row("optimizer", "choice", values=["adam", "sgd", "rmsprop"], ordered=False),
    _row("learning_rate", "float", min=1e-4, max=1e-2, step=None, sampling="log"),
    _when(_row("momentum", "float", min=0.0, max=0.9, step=0.1, sampling="linear"), "optimizer", ["sgd"]),
]

DENSE_DEFAULT_SPACE = [
    _row("num_layers", "int", min=1, max=3, step=1, sampling="linear"),
    _row("units", "int", min=32, max=256, step=32, sampling="linear"),
    _row("activation", "choice", values=["relu", "tanh", "gelu"], ordered=False),
    _row("dropout", "float", min=0.0, max=0.5, step=0.1, sampling="linear"),
    _row("batch_norm", "boolean"),
    *OPTIMIZER_ROWS,
]

CNN_DEFAULT_SPACE = [
    _row("blocks", "int", min=1, max=3, step=1, sampling="linear"),
    _row("filters", "int", min=16, max=64, step=16, sampling="linear"),
    _row("kernel_size", "choice", values=[3, 5], ordered=True),
    _row("batch_norm", "boolean"),
    _row("pooling", "choice", values=["max", "avg"], ordered=False),
    _row("dropout", "float", min=0.0, max=0.5, step=0.1, sampling="linear"),
    _row("head", "choice", values=["global_average", "flatten"], ordered=False),
    _row("dense_units", "int", min=32, max=256, step=32, sampling="linear"),
    _row("flip", "boolean"),
    _row("rotation", "float", min=0.0, max=0.2, step=0.05, sampling="linear"),
    _row("zoom", "float", min=0.0, max=0.2, step=0.05, sampling="linear"),
    *OPTIMIZER_ROWS,
]

TEXT_DEFAULT_SPACE = [
    _row("max_tokens", "int", min=1000, max=20000, step=None, sampling="log"),
    _row("sequence_length", "choice", values=[32, 64, 128, 256], ordered=True),
    _row("embedding_dim", "int", min=16, max=128, step=16, sampling="linear"),
    _row("encoder", "choice", values=["conv1d", "bilstm", "transformer"], ordered=False),
    _when(_row("conv_filters", "int", min=32, max=256, step=32, sampling="linear"), "encoder", ["conv1d"]),
    _when(_row("conv_kernel_size", "choice", values=[3, 5, 7], ordered=True), "encoder", ["conv1d"]),
    _when(_row("lstm_units", "int", min=16, max=128, step=16, sampling="linear"), "encoder", ["bilstm"]),
    _when(_row("num_heads", "choice", values=[2, 4], ordered=True), "encoder", ["transformer"]),
    _when(_row("ff_dim", "int", min=32, max=256, step=32, sampling="linear"), "encoder", ["transformer"]),
    _row("pooling", "choice", values=["average", "max"], ordered=False),
    _row("dropout", "float", min=0.0, max=0.5, step=0.1, sampling="linear"),
    *OPTIMIZER_ROWS,
]

SEQUENCE_DEFAULT_SPACE = [
    _row("layer_type", "choice", values=["lstm", "gru", "conv1d"], ordered=False),
    _row("num_layers", "int", min=1, max=3, step=1, sampling="linear"),
    _row("units", "int", min=16, max=128, step=16, sampling="linear"),
    _when(_row("bidirectional", "boolean"), "layer_type", ["lstm", "gru"]),
    _when(_row("kernel_size", "choice", values=[3, 5], ordered=True), "layer_type", ["conv1d"]),
    _row("dropout", "float", min=0.0, max=0.5, step=0.1, sampling="linear"),
    *OPTIMIZER_ROWS,
]

# keras_tuner.applications (keras_tuner/src/applications/): the names and values their
# build() uses with include_top=False; the head (dropout) and optimizer rows are ours.
RESNET_DEFAULT_SPACE = [
    _row("version", "choice", values=["v1", "v2", "next"], ordered=False),
    _row("conv3_depth", "choice", values=[4, 8], ordered=True),
    _row("conv4_depth", "choice", values=[6, 23, 36], ordered=True),
    _row("pooling", "choice", values=["avg", "max"], ordered=False),
    _row("dropout", "float", min=0.0, max=0.5, step=0.1, sampling="linear"),
    *OPTIMIZER_ROWS,
]

XCEPTION_DEFAULT_SPACE = [
    _row("activation", "choice", values=["relu", "selu"], ordered=False),
    _row("conv2d_num_filters", "choice", values=[32, 64, 128], ordered=True),
    _row("kernel_size", "choice", values=[3, 5], ordered=True),
    _row("initial_strides", "fixed", value=2),
    _row("sep_num_filters", "int", min=128, max=768, step=128, sampling="linear"),
    _row("num_residual_blocks", "int", min=2, max=8, step=1, sampling="linear"),
    _row("pooling", "choice", values=["avg", "flatten", "max"], ordered=False),
    _row("dropout", "float", min=0.0, max=0.5, step=0.1, sampling="linear"),
    *OPTIMIZER_ROWS,
]

# KerasTuner's HyperEfficientNet is not offered: it cannot be built without downloading
# ImageNet weights (workers/hypermodels/applications.py says why).


@dataclass(frozen=True)
class HypermodelEntry:
    name: str
    description: str
    default_space: list = field(default_factory=list)
    target: str = ""  # "package.module:function" for team-provided ones
    kinds: tuple[str, ...] = ("tabular",)  # the kinds of data it takes
    # The Keras backends it builds and trains on (compute_options.BACKENDS), and why not the others.
    backends: tuple[str, ...] = ("tensorflow", "jax")
    backend_note: str = ""


BUILTIN = {
    "dense": HypermodelEntry(
        name="dense",
        description="MLP for vector data (images and sequences are flattened): layers, units, activation, "
        "dropout, batch norm, optimizer and learning rate; inputs are normalised inside the model.",
        default_space=DENSE_DEFAULT_SPACE,
        kinds=("tabular", "image", "sequence"),
    ),
    "cnn": HypermodelEntry(
        name="cnn",
        description="Convolutional network for images: 1-3 conv blocks (filters doubling per block, kernel size, "
        "batch norm, max/average pooling, dropout), optional flip/rotation/zoom augmentation during training; "
        "takes raw 0-255 pixels.",
        default_space=CNN_DEFAULT_SPACE,
        kinds=("image",),
    ),
    "text": HypermodelEntry(
        name="text",
        description="Text classifier/regressor on raw strings: the training split's vocabulary (max_tokens words), "
        "an embedding, then a conv1d, bidirectional LSTM or Transformer encoder, pooling and dropout.",
        default_space=TEXT_DEFAULT_SPACE,
        kinds=("text",),
        backends=("tensorflow",),
        backend_note="needs TensorFlow: its TextVectorization layer turns raw strings into tokens with "
                     "TensorFlow string ops, which JAX has no equivalent of",
    ),
    "sequence": HypermodelEntry(
        name="sequence",
        description="LSTM, GRU (optionally bidirectional) or 1-D convolution layers over float sequences "
        "(time steps x features), normalised per feature inside the model.",
        default_space=SEQUENCE_DEFAULT_SPACE,
        kinds=("sequence",),
    ),
    "resnet": HypermodelEntry(
        name="resnet",
        description="KerasTuner's HyperResNet (ResNet v1/v2/ResNeXt, 50-152 layers), trained from scratch; images "
        "smaller than 32x32 are enlarged. Large: best with a GPU.",
        default_space=RESNET_DEFAULT_SPACE,
        kinds=("image",),
    ),
    "xception": HypermodelEntry(
        name="xception",
        description="KerasTuner's HyperXception (separable-convolution residual blocks), trained from scratch; "
        "images smaller than 32x32 are enlarged.",
        default_space=XCEPTION_DEFAULT_SPACE,
        kinds=("image",),
    ),
}


def _kinds_from_suffix(entry: str, suffix: str) -> tuple[str, ...]:
    kinds = tuple(kind.strip() for kind in suffix.split("+"))
    unknown = [kind for kind in kinds if kind not in KINDS]
    if unknown:
        raise ImproperlyConfigured(
            f"TUNEBOARD_HYPERMODELS entry {entry!r} names the data kind {unknown[0]!r}, which is unknown; "
            f"after '@' list one or more of {', '.join(KINDS)} joined by '+', like @image+sequence."
        )
    return tuple(dict.fromkeys(kinds))


def parse_hypermodel_setting(entries: list[str]) -> dict[str, HypermodelEntry]:
    found: dict[str, HypermodelEntry] = {}
    for entry in entries:
        name, _, target = entry.rpartition("=") if "=" in entry else ("", "", entry)
        target, at, suffix = target.partition("@")
        target = target.strip()
        kinds = _kinds_from_suffix(entry, suffix) if at else ("tabular",)
        module, _, attr = target.partition(":")
        if not module or not attr:
            raise ImproperlyConfigured(
                f"TUNEBOARD_HYPERMODELS entry {entry!r} must look like name=package.module:build_model "
                "(optionally followed by @image, @text, @sequence or kinds joined by '+')."
            )
        name = name.strip() or attr
        if name in BUILTIN or name in found:
            raise ImproperlyConfigured(f"TUNEBOARD_HYPERMODELS names {name!r} twice (or a built-in).")
        found[name] = HypermodelEntry(name=name, description=f"Team hypermodel {target}", target=target, kinds=kinds)
    return found


def hypermodel_entries() -> dict[str, HypermodelEntry]:
    return {**BUILTIN, **parse_hypermodel_setting(settings.HYPERMODELS)}


def _nouns(kinds: tuple[str, ...]) -> str:
    nouns = [_KIND_NOUNS[kind] for kind in kinds]
    return nouns[0] if len(nouns) == 1 else f"{', '.join(nouns[:-1])} or {nouns[-1]}"


def kind_mismatch(entry: HypermodelEntry, kind: str) -> str | None:
    """None when the hypermodel takes this kind of data, else why not, as a phrase that
    follows "The <name> hypermodel ..." (e.g. "takes text; this dataset holds images")."""
    if kind not in KINDS:
        raise ValueError(f"Unknown data kind {kind!r}; expected one of {', '.join(KINDS)}.")
    if kind in entry.kinds:
        return None
    return f"takes {_nouns(entry.kinds)}; this dataset holds {_KIND_NOUNS[kind]}"


def backend_mismatch(entry: HypermodelEntry, backend: str) -> str | None:
    """Why the hypermodel cannot train on `backend`, or None when it can."""
    if backend in entry.backends:
        return None
    return entry.backend_note or f"does not run on {backend}"


def hypermodels_for_kind(kind: str) -> list[tuple[HypermodelEntry, str | None]]:
    """Every registered hypermodel with None when it can train on this kind of data, or why not."""
    return [(entry, kind_mismatch(entry, kind)) for entry in hypermodel_entries().values()]
