"""How many trial slots `make run`'s embedded worker starts with: enough to run a parallel study, few enough not
to fill a laptop with TensorFlow processes."""

import os
import sys

MIN_DEFAULT, MAX_DEFAULT = 2, 4


def slots(environ=os.environ, cpus: int | None = None) -> int:
    raw = environ.get("TUNEBOARD_EMBEDDED_SLOTS", "").strip()
    if raw:
        if not raw.isdigit() or int(raw) < 1:
            raise SystemExit(f"TUNEBOARD_EMBEDDED_SLOTS must be a whole number of 1 or more, got {raw!r}.")
        return int(raw)
    cpus = cpus or os.cpu_count() or 1
    return max(MIN_DEFAULT, min(MAX_DEFAULT, cpus // 2))


def threads_per_slot(count: int, cpus: int | None = None) -> int:
    return max(1, (cpus or os.cpu_count() or 1) // count)


if __name__ == "__main__":  # scripts/run_embedded.sh: "SLOTS THREADS"
    count = slots()
    sys.stdout.write(f"{count} {threads_per_slot(count)}\n")
