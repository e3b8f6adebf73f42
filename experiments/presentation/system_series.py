"""A run's system samples as the small time series its page draws: one line per figure (CPU %,
memory, host load, and per GPU utilisation and memory), as SVG polyline points, with the latest
and the highest value in words. Figures a host did not give (no GPU) have no line."""

WIDTH, HEIGHT = 200, 36
MIB = 1024 * 1024


def _points(values: list[float]) -> str:
    top = max(values) or 1.0
    step = WIDTH / max(len(values) - 1, 1)
    return " ".join(f"{i * step:.1f},{HEIGHT - value / top * (HEIGHT - 2) - 1:.1f}" for i, value in enumerate(values))


def _line(name: str, unit: str, values: list, scale: float = 1.0) -> dict | None:
    values = [v / scale for v in values if v is not None]
    if not values:
        return None
    return {"name": name, "unit": unit, "latest": values[-1], "highest": max(values), "points": _points(values),
            "width": WIDTH, "height": HEIGHT}


def system_series(samples: list) -> list[dict]:
    """`samples`: one run's JobSample rows, oldest first."""
    values = [sample.values for sample in samples]
    lines = [_line("CPU", "% of a core", [v.get("cpu_percent") for v in values]),
             _line("Memory (RSS)", "MiB", [v.get("rss_bytes") for v in values], MIB),
             _line("Host load", "1-minute", [v.get("load1") for v in values])]
    gpu_indices = sorted({gpu["index"] for v in values for gpu in v.get("gpus", [])})
    for index in gpu_indices:
        of = [next((g for g in v.get("gpus", []) if g["index"] == index), {}) for v in values]
        lines += [_line(f"GPU {index} utilisation", "%", [g.get("utilization_percent") for g in of]),
                  _line(f"GPU {index} memory", "MiB", [g.get("memory_used_bytes") for g in of], MIB),
                  _line(f"GPU {index} power", "W", [g.get("power_watts") for g in of])]
    return [line for line in lines if line is not None]
