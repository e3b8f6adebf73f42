"""The serving contract (input and output keys a SavedModel answers under), kept per registered model so moving
an alias never breaks a client."""

import re

STABLE_KEY = re.compile(r"^(input|output)_\d+$")


def input_key(position: int) -> str:
    return f"input_{position}"


def output_key(position: int) -> str:
    return f"output_{position}"


def _spec(spec: dict, name: str) -> dict:
    return {"name": name, "shape": list(spec.get("shape") or []), "dtype": spec.get("dtype", "")}


def _served_names(keras_inputs: list[dict], served: list[str]) -> list[str]:
    """The key each Keras input is served under: `input_<position>` for SavedModels of the stable
    scheme (and for a model whose SavedModel is still to be made: it will be made so); for an
    older one, the Keras input name it was exported under."""
    names = []
    for position, spec in enumerate(keras_inputs):
        stable = input_key(position)
        if not served or stable in served:
            names.append(stable)
        elif spec.get("name") in served:
            names.append(spec["name"])
        else:  # an older export whose names match neither: by position in its sorted keys
            names.append(sorted(served)[position] if position < len(served) else stable)
    return names


def model_contract(signature: dict | None) -> dict:
    """A trained model's contract from its stored signature (workers/export/formats.py):
    {"inputs": [{"name", "shape", "dtype"}], "outputs": [key, ...]}; no inputs when the
    signature was not recorded."""
    signature = signature or {}
    keras_inputs = (signature.get("keras") or {}).get("inputs") or []
    serving = signature.get("serving") or {}
    served_inputs = [spec.get("name", "") for spec in serving.get("inputs") or []]
    names = _served_names(keras_inputs, served_inputs)
    outputs = [spec.get("name", "") for spec in serving.get("outputs") or []]
    if not outputs:
        count = len((signature.get("keras") or {}).get("outputs") or []) or 1
        outputs = [output_key(position) for position in range(count)]
    return {"inputs": [_spec(spec, name) for spec, name in zip(keras_inputs, names, strict=True)],
            "outputs": outputs}


def registered_contract(input_signature: list[dict], output_keys: list[str], first_version: dict | None) -> dict:
    """A registered model's contract from its row. Rows made before names were recorded hold only
    shapes and dtypes: they adopt the names their first version serves (`first_version`, its model
    contract), the names every later version was registered beside."""
    adopted = first_version or {"inputs": [], "outputs": []}
    inputs = []
    for position, spec in enumerate(input_signature or adopted["inputs"]):
        name = spec.get("name")
        if not name:
            name = (adopted["inputs"][position]["name"] if position < len(adopted["inputs"])
                    else input_key(position))
        inputs.append(_spec(spec, name))
    outputs = list(output_keys or []) or list(adopted["outputs"]) or [output_key(0)]
    return {"inputs": inputs, "outputs": outputs}


def describe_spec(spec: dict) -> str:
    shape = ", ".join("None" if d is None else str(d) for d in spec["shape"])
    return f"{spec['dtype']} ({shape})"


def _keys(names: list[str]) -> str:
    return ", ".join(repr(name) for name in names)


def contract_differences(expected: dict, given: dict) -> list[str]:
    """What differs between two contracts, in words; [] when a client of one can call the other."""
    want, got = expected["inputs"], given["inputs"]
    if len(want) != len(got):
        return [f"it takes {len(got)} input{'s' if len(got) != 1 else ''}, not {len(want)}"]
    differences = []
    for index, (w, g) in enumerate(zip(want, got, strict=True), start=1):
        where = f"input {index}" if len(want) > 1 else "its input"
        if (w["shape"], w["dtype"]) != (g["shape"], g["dtype"]):
            differences.append(f"{where} is {describe_spec(g)}, not {describe_spec(w)}")
        if w["name"] != g["name"]:
            differences.append(f"{where} is served as {g['name']!r}, not {w['name']!r}")
    if expected["outputs"] != given["outputs"]:
        differences.append(f"it answers under {_keys(given['outputs'])}, not {_keys(expected['outputs'])}")
    return differences


def older_names(*contracts: dict) -> bool:
    """Whether any of the contracts serves under names from before the stable scheme."""
    return any(not STABLE_KEY.match(name) for contract in contracts
               for name in [spec["name"] for spec in contract["inputs"]] + list(contract["outputs"]))
