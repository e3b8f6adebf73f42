"""A registered model's serving contract for a person, with the TF Serving REST request that works for every version
(it names the inputs, so a client keeps it when an alias moves)."""

import json

from experiments.serving.contract import describe_spec

# An example with more values than this is shown shortened: every axis longer than SHORT written
# as its first two items and "… N in all" (a 28×28 image would be 784 zeros); channels stay whole.
FULL_VALUES = 100
SHORT = 4
EXAMPLE_TEXT = "an example text"


def _leaf(dtype: str) -> str:
    if dtype == "string":
        return json.dumps(EXAMPLE_TEXT)
    if dtype == "bool":
        return "false"
    return "0.0" if dtype.startswith(("float", "bfloat")) else "0"


def _size(dims: list[int]) -> int:
    size = 1
    for d in dims:
        size *= d
    return size


def _nested(dims: list[int], leaf: str, *, shorten: bool) -> str:
    """One example of shape `dims` as JSON nested lists (a scalar for shape ()), shortened when asked."""
    if not dims:
        return leaf
    inner = _nested(dims[1:], leaf, shorten=shorten)
    if shorten and dims[0] > SHORT:
        return f"[{inner}, {inner}, … {dims[0]} in all]"
    return "[" + ", ".join([inner] * dims[0]) + "]"


def _example(spec: dict) -> tuple[str, bool]:
    # A free dimension past the batch (a text's or a sequence's length) gets one step.
    dims = [1 if d is None else int(d) for d in spec["shape"][1:]]
    shorten = _size(dims) > FULL_VALUES
    return _nested(dims, _leaf(spec["dtype"]), shorten=shorten), shorten


def _values(spec: dict) -> str:
    """What one example of an input is, in words: "8 × 8 × 1 nested lists of integers 0-255"."""
    dims, dtype = spec["shape"][1:], spec["dtype"]
    each = {"string": "UTF-8 strings", "uint8": "integers 0-255"}.get(dtype, f"{dtype} values")
    if not dims:
        return "a UTF-8 string" if dtype == "string" else f"one {dtype} value"
    sizes = " × ".join("n" if d is None else str(d) for d in dims)
    free = " (n: any length)" if None in dims else ""
    return (f"a list of {sizes} {each}" if len(dims) == 1 else f"{sizes} nested lists of {each}") + free


def serving_path(name: str, aliases: list[str]) -> str:
    """TF Serving's predict path for the registered model: by its `production` alias (else its
    first) when it has one, else the name alone (TF Serving's latest version)."""
    if not aliases:
        return f"/v1/models/{name}:predict"
    alias = "production" if "production" in aliases else sorted(aliases)[0]
    return f"/v1/models/{name}/labels/{alias}:predict"


def serving_request(*, name: str, contract: dict, aliases: list[str]) -> dict:
    """{"method", "path", "body" (JSON text, one example), "shortened" (the body's "…" stand for
    the rest of each list), "inputs" (each with `text` and `values`, in words), "outputs"}."""
    examples = {spec["name"]: _example(spec) for spec in contract["inputs"]}
    columns = ", ".join(f"{json.dumps(key)}: [{example}]" for key, (example, _) in examples.items())
    return {
        "method": "POST", "path": serving_path(name, aliases), "body": f'{{"inputs": {{{columns}}}}}',
        "shortened": any(shortened for _, shortened in examples.values()),
        "inputs": [{**spec, "text": describe_spec(spec), "values": _values(spec)} for spec in contract["inputs"]],
        "outputs": list(contract["outputs"]),
    }
