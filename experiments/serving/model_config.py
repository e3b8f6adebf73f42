"""TF Serving's --model_config_file in protobuf text format, written by hand so neither the web nor workers need
protobuf's generated classes or TF Serving's package."""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ServedModel:
    """One `config { ... }` entry: the versions TF Serving loads (a `specific` policy, so only
    these, whatever else lies in the folder) and the labels (`production` -> 3)."""

    name: str
    base_path: str
    versions: tuple[int, ...]
    labels: dict[str, int] = field(default_factory=dict)


def _quoted(text: str) -> str:
    """A text-format string literal: backslash escapes for quotes, backslashes and every byte
    outside printable ASCII (octal, as protobuf's own printer writes them)."""
    out = []
    for byte in text.encode("utf-8"):
        char = chr(byte)
        if char in '"\\':
            out.append("\\" + char)
        elif 0x20 <= byte < 0x7F:
            out.append(char)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def models_config_text(models: list[ServedModel]) -> str:
    lines = ["# Written by Tuneboard's serving export; rewritten on every export (edits are lost).",
             "model_config_list {"]
    for model in models:
        lines += ["  config {",
                  f"    name: {_quoted(model.name)}",
                  f"    base_path: {_quoted(model.base_path)}",
                  '    model_platform: "tensorflow"',
                  "    model_version_policy {",
                  "      specific {",
                  *[f"        versions: {version}" for version in sorted(model.versions)],
                  "      }",
                  "    }"]
        for label, version in sorted(model.labels.items()):
            lines += ["    version_labels {", f"      key: {_quoted(label)}", f"      value: {version}", "    }"]
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"
