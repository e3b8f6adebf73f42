"""The same benchmarks on two commits, same host, one window, interleaved rounds: does a
restructuring slow the pages, the API or the orchestration down?

    python -m benchmarks.before_after BEFORE [AFTER] [--rounds 3] [--out NAME] [--only pages api]
                                      [--requests N]

Each commit is checked out into a temporary git worktree and each benchmark runs there as its
own process against its own database (so neither side sees the other's code or rows); the
order alternates each round so drift in the machine's load hits both sides alike. Both sides
measure with this checkout's pages, API and harness modules (MEASURING), so only the product
differs; --requests raises the requests per page, which steadies the medians. Writes
benchmarks/results/NAME.json (default before-after.json): per figure the rounds of each side,
their medians and `change_pct` (after over before, + is slower for times)."""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.harness import RESULTS, ROOT

# (module, arguments, the figures compared): times and query counts the restructure may change.
BENCHMARKS = [
    ("benchmarks.pages", [], [f"{page}_{figure}" for page in ("study_page", "chart_data", "leaderboard")
                              for figure in ("median_ms", "p95_ms", "queries")]),
    ("benchmarks.api", [], None),  # every time and query count it prints
    ("benchmarks.orchestration", ["overhead"], ["overhead_ms_per_trial", "overhead_vs_sleep_ms_per_trial"]),
]


def _flatten(result: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in result.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            flat[f"{prefix}{key}"] = value
    return flat


# The measuring code both sides run (copied over theirs): the figures differ only by the product.
MEASURING = ("harness.py", "pages.py", "api.py")


def _run(checkout: Path, module: str, args: list[str], side: str, requests: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(checkout), "TUNEBOARD_BENCH_DATABASE": f"tuneboard_bench_{side}",
           "TUNEBOARD_BENCH_REQUESTS": str(requests)}
    done = subprocess.run([sys.executable, "-m", module, *args], cwd=checkout, env=env, capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{module} failed on {side}:\n{done.stderr[-3000:]}")
    return _flatten(json.loads(done.stdout.strip().splitlines()[-1]))


def _worktree(commit: str, where: Path) -> Path:
    subprocess.run(["git", "worktree", "add", "--detach", str(where), commit], cwd=ROOT, check=True,
                   capture_output=True)
    for name in MEASURING:
        shutil.copy(ROOT / "benchmarks" / name, where / "benchmarks" / name)
    return where


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("before")
    parser.add_argument("after", nargs="?", default="HEAD")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default="before-after")
    parser.add_argument("--only", nargs="*", default=None, help="benchmark modules to run, e.g. pages api")
    parser.add_argument("--requests", type=int, default=30, help="requests per page and API route")
    options = parser.parse_args()
    commits = {side: subprocess.run(["git", "rev-parse", "--short", ref], cwd=ROOT, check=True, capture_output=True,
                                    text=True).stdout.strip()
               for side, ref in (("before", options.before), ("after", options.after))}
    rounds: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        checkouts = {side: _worktree(commit, Path(tmp) / side) for side, commit in commits.items()}
        try:
            for number in range(options.rounds):
                order = ("before", "after") if number % 2 == 0 else ("after", "before")
                for module, args, keys in [b for b in BENCHMARKS
                                           if options.only is None or b[0].split(".")[-1] in options.only]:
                    for side in order:
                        figures = _run(checkouts[side], module, args, side, options.requests)
                        for key in keys or [k for k in figures if ("_ms" in k or "queries" in k)
                                                               and not k.startswith("targets.")]:
                            if key in figures:
                                rounds.setdefault(f"{module.split('.')[-1]}.{key}", {"before": [], "after": []}
                                                  )[side].append(figures[key])
                        print(f"round {number + 1} {module} {side} done", file=sys.stderr)
        finally:
            for where in checkouts.values():
                subprocess.run(["git", "worktree", "remove", "--force", str(where)], cwd=ROOT, check=False)
    figures = {}
    for key, sides in rounds.items():
        before, after = statistics.median(sides["before"]), statistics.median(sides["after"])
        figures[key] = {**sides, "before_median": before, "after_median": after,
                        "change_pct": round(100 * (after - before) / before, 1) if before else None}
    result = {"before": commits["before"], "after": commits["after"], "rounds": options.rounds,
              "requests": options.requests,
              "cores": os.cpu_count(), "load_average_at_end": os.getloadavg()[0], "figures": figures}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{options.out}.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
