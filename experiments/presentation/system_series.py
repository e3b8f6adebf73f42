"""A run's system samples as the small time series its page draws: one line per figure (CPU %,
memory, host load, samples per second, and per GPU utilisation, memory and the backend's own
count of its memory), as SVG polyline points, with the latest and the highest value in words.
Figures a host did not give (no GPU) have no line. And the one verdict worth words: a GPU that
mostly waited while the process kept a core busy is starved by its input pipeline."""

from statistics import mean

WIDTH, HEIGHT = 200, 36
MIB = 1024 * 1024
# Input-bound: the GPU's mean utilisation below this while the process's CPU stays above BUSY_CPU.
IDLE_GPU_PERCENT = 50
BUSY_CPU_PERCENT = 80


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
    """`samples`: one run's samples as {"at", "values"} dicts, oldest first (selectors/job_logs.py)."""
    values = [sample["values"] for sample in samples]
    lines = [_line("CPU", "% of a core", [v.get("cpu_percent") for v in values]),
             _line("Memory (RSS)", "MiB", [v.get("rss_bytes") for v in values], MIB),
             _line("Host load", "1-minute", [v.get("load1") for v in values]),
             _line("Training speed", "samples/s", [v.get("samples_per_second") for v in values])]
    gpu_indices = sorted({gpu["index"] for v in values for gpu in v.get("gpus", [])})
    for index in gpu_indices:
        of = [next((g for g in v.get("gpus", []) if g["index"] == index), {}) for v in values]
        lines += [_line(f"GPU {index} utilisation", "%", [g.get("utilization_percent") for g in of]),
                  _line(f"GPU {index} memory", "MiB", [g.get("memory_used_bytes") for g in of], MIB),
                  _line(f"GPU {index} power", "W", [g.get("power_watts") for g in of])]
    devices = list(dict.fromkeys(d["device"] for v in values for d in v.get("device_memory", [])))
    for device in devices:
        of = [next((d for d in v.get("device_memory", []) if d["device"] == device), {}) for v in values]
        lines.append(_line(f"{device} memory (backend)", "MiB", [d.get("bytes_in_use") for d in of], MIB))
    return [line for line in lines if line is not None]


def input_bound(samples: list) -> str | None:
    """Words for a run whose GPUs mostly waited while its process kept a core busy (preparing
    batches on the host), or None. Each GPU's mean utilisation over the run's samples."""
    values = [sample["values"] for sample in samples]
    cpu = [v["cpu_percent"] for v in values if v.get("cpu_percent") is not None]
    utilisation = [g["utilization_percent"] for v in values for g in v.get("gpus", [])
                   if g.get("utilization_percent") is not None]
    if len(cpu) < 2 or not utilisation or mean(cpu) < BUSY_CPU_PERCENT:
        return None
    busy = mean(utilisation)
    if busy >= IDLE_GPU_PERCENT:
        return None
    return (f"Input-bound: the GPU waited {100 - busy:.0f} % of the time while the process kept a core "
            f"{mean(cpu):.0f} % busy; try a larger batch or more steps per execution.")
