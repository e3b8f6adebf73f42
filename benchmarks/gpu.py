"""Tuneboard's training on the accelerator at hand (a GPU if there is one, else the CPU), on
every Keras backend installed (JAX, TensorFlow), with no PostgreSQL or Redis.

    python -m benchmarks.gpu             # sizes by device: a GPU-sized cnn on a GPU, a small one on CPU
    python -m benchmarks.gpu --quick     # the CPU sizes and one round, wherever it runs
    python -m benchmarks.gpu --rounds 5 --backends jax

The embedded mode, as `make run` uses it: a SQLite database and an artifact folder in a
temporary folder, migrated here; Celery's in-memory transport (no worker: every trial is run
in-process by workers.jobs.trials.run_next_trial, the function the run-trial task calls). A dataset
of generated images (10 classes, a faint pattern per class under noise) is uploaded as an .npz
through the dataset service; each measured trial belongs to a study of the `cnn` hypermodel
with every hyperparameter fixed (the model and batch below), started through the study
service, with the median pruner on (its check runs at every epoch; one trial alone is never
pruned) and patience above the epochs (no early stop).

Every measurement runs in a fresh process (benchmarks/gpu_child.py) with KERAS_BACKEND set;
this process never loads Keras or a backend. Figures, per backend:
1. samples/s inside a Tuneboard trial vs a plain `model.fit` of the same model (the `cnn`
   build function with the same values, in-memory NumPy arrays, no callbacks) in a fresh
   process: `tuneboard_vs_plain_ratio` (target >= 0.97);
   and on JAX vs `limit`, the same model trained by one jitted step over rows kept on the device
   (Keras's stateless API under jax.jit): `tuneboard_vs_limit_ratio` (target >= 0.85);
2. float32 vs mixed precision (mixed_float16 on a GPU, mixed_bfloat16 on CPU or TPU);
3. steps_per_execution 1 vs 32;
4. 1, 2, 4 and 8 trials packed on one device (that many processes, started together, each
   running a trial of its own study): aggregate samples/s (`packing` -> n -> `aggregate_vs_one`)
   and the per-trial slowdown; and what `auto` packing's rule settles on given those levels,
   against the best fixed one (`auto_vs_best_fixed_packing`, target >= 0.9);
5. JAX vs TensorFlow, when both are installed and see the same kind of device.
The default GPU size is the large model; the study-sized one (packing's target: 4 packed trials
>= 3x one) is `--set side=32,batch_size=128,blocks=2,filters=16,head=flatten,dense_units=64`
(and side=8 for digits-sized images), each run with its own `--output`.
Each trial arm also records what the product itself measured of the GPU during the trial (its
system samples, every second here: mean NVML utilisation, highest memory used).

Samples/s is steady state: training rows over an epoch's wall time (its validation pass
included), the median of epochs 3..N. The first two are warm-up (their times are in the JSON):
the first traces and compiles; on JAX a trial's second compiles once more, for the last, smaller
batch, which Keras 3.15's PyDataset enqueuer hands over only then (with workers > 1 it keeps the
batches it prefetched for fit's first look at the data and serves them first, so each epoch's
stream is one batch late); a plain fit on arrays compiles both in its first. A trial's epochs
are timed by its TrialEpoch rows' `created` stamps, taken by the per-epoch database report at
each epoch's end, so the time between two rows is one whole epoch of the real trial path
(training, validation, Tuneboard's callbacks, the database write, the pruning check, the
heartbeat thread beside it); the plain fit stamps the clock at each epoch end. Rounds run in one
window, each through every arm in turn (plain and trial alternate which goes first), so drift
in the machine's speed reaches all arms alike. The median over rounds is the figure; every
round is in the JSON. Prints one JSON object as its last line and
writes benchmarks/results/gpu-<device>.json.
"""

import argparse
import json
import os
import platform
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata, util
from pathlib import Path

from benchmarks.harness import RESULTS, ROOT

CLASSES = 10
# A GPU: 128x128 RGB images through four conv blocks of 64-512 filters with batch norm, in batches of
# 256: about 5.6 GFLOPs a training image, enough work per step to keep a current GPU busy.
GPU_SIZE = {"rows": 32_000, "side": 128, "batch_size": 256, "epochs": 7,
            "values": {"blocks": 4, "filters": 64, "kernel_size": 3, "batch_norm": True, "pooling": "max",
                       "dropout": 0.0, "head": "global_average", "dense_units": 256}}
# A CPU (two cores here): a small model that runs every figure in minutes.
CPU_SIZE = {"rows": 5_000, "side": 32, "batch_size": 64, "epochs": 6,
            "values": {"blocks": 2, "filters": 16, "kernel_size": 3, "batch_norm": False, "pooling": "max",
                       "dropout": 0.0, "head": "flatten", "dense_units": 64}}
COMMON_VALUES = {"flip": False, "rotation": 0.0, "zoom": 0.0, "optimizer": "adam", "learning_rate": 1e-3}
PACKED = (2, 4, 8)
WARMUP_EPOCHS = 2  # left out of the timing (see above)
SEED = 1
VERSION_PACKAGES = ("keras", "jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda12-pjrt", "jax-cuda13-plugin",
                    "jax-cuda13-pjrt", "tensorflow", "keras-tuner", "numpy", "django", "celery")


def versions(importable: list[str]) -> dict:
    """Installed versions; a backend installed but not importable here (blocked) counts as absent."""
    found = {"python": platform.python_version()}
    for name in VERSION_PACKAGES:
        try:
            found[name] = metadata.version(name) if name not in ("jax", "tensorflow") or name in importable else None
        except metadata.PackageNotFoundError:
            if not name.startswith("jax-cuda"):
                found[name] = None
    return found


def installed_backends() -> list[str]:
    """JAX first: the backend Tuneboard's GPU workers are expected to run (no TensorFlow there)."""
    return [name for name in ("jax", "tensorflow") if _importable(name)]


def _importable(name: str) -> bool:
    try:
        return util.find_spec(name) is not None
    except ImportError:  # blocked (tests/fixtures/no_tensorflow) or half installed
        return False


def _cpu_model() -> str:
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    found = re.search(r"^model name\s*:\s*(.+)$", info, re.MULTILINE)
    return found.group(1).strip() if found else platform.processor() or "unknown"


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


class Runner:
    """Starts the measuring processes, with the embedded mode's environment and the backend's."""

    def __init__(self, embedded: dict, device_kind: str):
        self.embedded = embedded
        self.device_kind = device_kind

    def env(self, backend: str, parallel: int = 1) -> dict:
        env = {**os.environ, **self.embedded, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}
        if self.device_kind == "cpu":
            # As the embedded worker shares a CPU between its slots (webapp/embedded.py): each of the
            # processes running at once gets cores / processes threads, at least one.
            env["TUNEBOARD_TF_THREADS"] = str(max(1, _cores() // parallel))
        if backend == "tensorflow":
            # Packed trials share a GPU: TensorFlow otherwise takes all its memory in the first one (JAX's
            # preallocation is turned off by the worker's own start-up, workers/host/backends/child.configure_child).
            env.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
        return env

    def start(self, request: dict, *, parallel: int = 1) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "benchmarks.gpu_child", json.dumps(request)], cwd=ROOT,
                                env=self.env(request["backend"], parallel), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    @staticmethod
    def result(process: subprocess.Popen, request: dict, timeout: float = 3600) -> dict:
        out, err = process.communicate(timeout=timeout)
        lines = out.strip().splitlines()
        if process.returncode != 0 or not lines:
            raise RuntimeError(f"{request['mode']} on {request['backend']} failed ({process.returncode}):\n"
                               f"{err[-4000:]}")
        return json.loads(lines[-1])

    def run(self, request: dict) -> dict:
        return self.result(self.start(request), request)


def _embedded(folder: Path) -> dict:
    """The embedded mode's settings (webapp/settings.py), in a folder of this run's own."""
    return {
        "DATABASE_URL": f"sqlite:///{folder / 'tuneboard.sqlite3'}",
        "TUNEBOARD_VAR_DIR": str(folder / "var"),
        "TUNEBOARD_ARTIFACT_STORAGE": "filesystem",
        "CELERY_BROKER_URL": "memory://localhost/",  # wake-ups are sent nowhere: the trials run in-process
        "SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_SETTINGS_MODULE": "webapp.settings",
        "TUNEBOARD_MAX_DATASET_MB": "16384",
        "LOG_LEVEL": "WARNING",
        # Each trial's system samples (NVML on a GPU) every second: the product's own utilisation figure per arm.
        "TUNEBOARD_SYSTEM_SAMPLE_SECONDS": "1",
    }


def setup_django(embedded: dict) -> None:
    os.environ.update(embedded)
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)


def _images(rows: int, side: int):
    """uint8 images: a faint per-class pattern under noise, so the model has something to learn."""
    import numpy as np

    rng = np.random.default_rng(0)
    y = rng.integers(0, CLASSES, size=rows)
    patterns = rng.integers(-24, 25, size=(CLASSES, side, side, 3), dtype=np.int16)
    x = np.empty((rows, side, side, 3), np.uint8)
    for start in range(0, rows, 1024):
        part = slice(start, start + 1024)
        noise = rng.integers(64, 192, size=x[part].shape, dtype=np.int16)
        x[part] = np.clip(noise + patterns[y[part]], 0, 255).astype(np.uint8)
    return x, y


def create_dataset(folder: Path, size: dict):
    """A team, a user and the generated images, uploaded as an .npz through the dataset service;
    its splits also written as .npy files for the plain fits. Returns (team, user, dataset, rows)."""
    import numpy as np

    from experiments.selectors.artifacts import artifact_copy_to_path
    from experiments.services.accounts import account_create
    from experiments.services.datasets import UploadOptions, dataset_create_upload
    from experiments.services.teams import team_create

    x, y = _images(size["rows"], size["side"])
    upload = folder / "images.npz"
    np.savez(upload, x=x, y=y)
    del x, y
    user = account_create(username="bench", password=secrets.token_urlsafe(16))
    team = team_create(name="bench", owner=user)
    with open(upload, "rb") as file:
        dataset = dataset_create_upload(team=team, user=user, name="generated images", filename="images.npz",
                                        data=file, size=upload.stat().st_size, limit_mb=16384,
                                        options=UploadOptions(kind="image"))
    upload.unlink()
    arrays = folder / "plain"
    arrays.mkdir()
    splits = artifact_copy_to_path(artifact=dataset.arrays, path=folder / "splits.npz")
    with np.load(splits) as npz:
        for name in ("x_train", "y_train", "x_val", "y_val"):
            np.save(arrays / f"{name}.npy", npz[name])
    splits.unlink()
    return team, user, dataset, arrays


class Studies:
    """One started study per measured trial: the cnn with every hyperparameter fixed."""

    def __init__(self, team, user, dataset, size: dict, queue: str):
        self.team, self.user, self.dataset, self.size, self.queue = team, user, dataset, size, queue
        self.count = 0

    def start(self, backend: str, *, precision: str = "float32", steps_per_execution: int = 1) -> int:
        from experiments.services.studies import study_create, study_start

        self.count += 1
        values = {**COMMON_VALUES, **self.size["values"]}
        space = [{"name": k, "type": "fixed", "value": v, "parent": None, "parent_values": []}
                 for k, v in values.items()]
        study = study_create(
            team=self.team, user=self.user, dataset=self.dataset, name=f"bench {self.count} {backend}",
            hypermodel="cnn", search_space=space, tuner="random", objective_metric="val_loss",
            objective_direction="min", max_trials=1, epochs=self.size["epochs"], batch_size=self.size["batch_size"],
            patience=self.size["epochs"] + 1, seed=SEED, queue=self.queue, backend=backend, precision=precision,
            steps_per_execution=steps_per_execution, pruner="median", pruning_startup_trials=0,
            pruning_warmup_epochs=0, pruning_min_trials=1,
        )
        return study_start(study=study).id


def _between(ends: list[float]) -> list[float]:
    return [b - a for a, b in zip(ends[:-1], ends[1:], strict=True)]


def _rate(ends: list[float], cpu_ends: list[float], rows: int) -> dict:
    """Steady-state samples/s from the epoch-end stamps (the end of epoch 1, 2, ...): epochs
    WARMUP_EPOCHS + 1 .. N; and per second of the process's CPU time, from its CPU-time stamps."""
    seconds, cpu = _between(ends[WARMUP_EPOCHS - 1:]), _between(cpu_ends[WARMUP_EPOCHS - 1:])
    if not seconds or len(cpu) != len(seconds):
        raise RuntimeError(f"epochs to time: {len(seconds)} by the clock, {len(cpu)} by CPU time")
    return {"samples_per_second": round(rows / statistics.median(seconds), 1),
            "samples_per_cpu_second": round(rows / statistics.median(cpu), 1),
            "epoch_seconds": [round(s, 4) for s in seconds], "epoch_cpu_seconds": [round(s, 4) for s in cpu],
            # Warm-up epochs after the first (which has no start stamp), by the clock.
            "warmup_epoch_seconds": [round(s, 4) for s in _between(ends[:WARMUP_EPOCHS])],
            "window": [ends[WARMUP_EPOCHS - 1], ends[-1]]}


def trial_figures(study_id: int, child: dict, rows: int) -> dict:
    from experiments.models import Trial

    trial = Trial.objects.get(study_id=study_id)
    if trial.status != Trial.Status.COMPLETED:
        raise RuntimeError(f"the trial of study {study_id} ended {trial.status}: {trial.error}")
    ends = [row.created.timestamp() for row in trial.epochs.order_by("execution", "epoch")]
    return {**_rate(ends, child["epoch_cpu_ends"], rows), "trial_seconds": round(child["ended"] - child["started"], 2),
            "compute": {k: trial.compute.get(k) for k in ("device_kind", "device_names", "replicas", "precision",
                                                          "steps_per_execution", "global_batch_size")},
            **product_gpu_figures(trial)}


def product_gpu_figures(trial) -> dict:
    """What the product itself measured of the trial's GPUs (its system samples, NVML): the mean
    utilisation over the samples, and the highest memory used. None without GPU samples."""
    from experiments.selectors.job_logs import trial_logs

    samples = [sample["values"] for log in trial_logs(trial, samples=True) for sample in log.sample_rows]
    gpus = [gpu for values in samples for gpu in values.get("gpus", [])]
    busy = [gpu["utilization_percent"] for gpu in gpus if gpu.get("utilization_percent") is not None]
    memory = [gpu["memory_used_bytes"] for gpu in gpus if gpu.get("memory_used_bytes") is not None]
    return {"product_system_samples": len(samples),
            "product_gpu_utilisation_mean_percent": round(statistics.mean(busy), 1) if busy else None,
            "product_gpu_memory_used_max_mb": round(max(memory) / 2**20) if memory else None}


class Bench:
    def __init__(self, runner: Runner, studies: Studies, arrays: Path, size: dict, mixed: str, rows: int):
        self.runner, self.studies, self.arrays, self.size, self.mixed, self.rows = (
            runner, studies, arrays, size, mixed, rows)

    def plain(self, backend: str) -> dict:
        return self._outside_a_trial("plain", backend)

    def limit(self, backend: str) -> dict:
        return self._outside_a_trial("limit", backend)

    def _outside_a_trial(self, mode: str, backend: str) -> dict:
        """The same model trained without Tuneboard: a plain fit, or the limit (benchmarks/gpu_child.py)."""
        request = {"mode": mode, "backend": backend, "arrays": str(self.arrays), "seed": SEED,
                   "values": {**COMMON_VALUES, **self.size["values"]}, "classes": CLASSES,
                   "batch_size": self.size["batch_size"], "epochs": self.size["epochs"]}
        found = self.runner.run(request)
        return {**_rate(found["epoch_ends"], found["epoch_cpu_ends"], self.rows),
                "fit_seconds": round(found["ended"] - found["started"], 2)}

    def trials(self, backend: str, count: int = 1, **settings) -> list[dict]:
        """`count` trials at once, each in its own process on the same device."""
        with tempfile.TemporaryDirectory() as barrier:
            requests = [{"mode": "trial", "backend": backend, "study_id": self.studies.start(backend, **settings),
                         "barrier": barrier if count > 1 else None, "parties": count} for _ in range(count)]
            processes = [self.runner.start(r, parallel=count) for r in requests]
            found = [self.runner.result(p, r) for p, r in zip(processes, requests, strict=True)]
        return [trial_figures(r["study_id"], f, self.rows) for r, f in zip(requests, found, strict=True)]

    def round(self, backend: str, index: int, figures: set[str]) -> dict:
        """One round of every arm on one backend; plain and trial alternate which goes first."""
        found = {"load_before": _load()}
        order = ("plain", "trial") if index % 2 == 0 else ("trial", "plain")
        for arm in order:
            found[arm] = self.plain(backend) if arm == "plain" else self.trials(backend)[0]
        if "limit" in figures and backend == "jax":
            found["limit"] = self.limit(backend)
        if "precision" in figures:
            found[self.mixed] = self.trials(backend, precision=self.mixed)[0]
        if "steps" in figures:
            found["steps_per_execution_32"] = self.trials(backend, steps_per_execution=32)[0]
        if "packing" in figures:
            for count in PACKED:
                found[f"packed_{count}"] = self.trials(backend, count)
        found["load_after"] = _load()
        rate = "samples_per_second"
        shown = ", ".join(f"{k} {v[rate] if isinstance(v, dict) else [t[rate] for t in v]}"
                          for k, v in found.items() if not k.startswith("load"))
        print(f"round {index + 1} {backend}: {shown} (load {found['load_after']})", file=sys.stderr, flush=True)
        return found


def _median(values: list[float], digits: int = 1) -> float:
    return round(statistics.median(values), digits)


def _overlap(trials: list[dict]) -> float:
    """How much of their timed windows the packed trials ran together (1: entirely)."""
    start, end = max(t["window"][0] for t in trials), min(t["window"][1] for t in trials)
    mean = statistics.mean(t["window"][1] - t["window"][0] for t in trials)
    return round(max(0.0, end - start) / mean, 3) if mean > 0 else 0.0


def summarise(rounds: list[dict], mixed: str) -> dict:
    """Per backend: medians over rounds of each arm, the ratios, and every round."""
    def rates(arm: str, unit: str = "samples_per_second") -> list[float]:
        return [r[arm][unit] for r in rounds if arm in r]

    plain, trial = rates("plain"), rates("trial")
    plain_cpu, trial_cpu = rates("plain", "samples_per_cpu_second"), rates("trial", "samples_per_cpu_second")
    summary = {
        "plain_fit": {"samples_per_second": _median(plain), "rounds": plain,
                      "samples_per_cpu_second": _median(plain_cpu), "cpu_rounds": plain_cpu,
                      "fit_seconds": [r["plain"]["fit_seconds"] for r in rounds]},
        "tuneboard": {"samples_per_second": _median(trial), "rounds": trial,
                      "samples_per_cpu_second": _median(trial_cpu), "cpu_rounds": trial_cpu,
                      "trial_seconds": [r["trial"]["trial_seconds"] for r in rounds],
                      "compute": rounds[0]["trial"]["compute"]},
        "tuneboard_vs_plain_ratio": round(_median(trial) / _median(plain), 3),
        "tuneboard_vs_plain_ratio_by_round": [round(t / p, 3) for t, p in zip(trial, plain, strict=True)],
        # The same from CPU time (all the process's threads): what other processes on a shared
        # host hardly move. On a GPU it says little (the GPU does the work).
        "tuneboard_vs_plain_cpu_time_ratio": round(_median(trial_cpu) / _median(plain_cpu), 3),
    }
    if rates(mixed):
        summary["mixed_precision"] = {"policy": mixed, "float32_samples_per_second": _median(trial),
                                      "mixed_samples_per_second": _median(rates(mixed)), "rounds": rates(mixed),
                                      "speedup": round(_median(rates(mixed)) / _median(trial), 3)}
    if rates("steps_per_execution_32"):
        spe = rates("steps_per_execution_32")
        summary["steps_per_execution"] = {"1_samples_per_second": _median(trial), "32_samples_per_second": _median(spe),
                                          "rounds_32": spe, "speedup": round(_median(spe) / _median(trial), 3)}
    if any(f"packed_{n}" in r for r in rounds for n in PACKED):
        packing = {"1": {"aggregate_samples_per_second": _median(trial), "per_trial_samples_per_second": _median(trial),
                         "slowdown": 1.0, "rounds": trial}}
        for count in PACKED:
            runs = [r[f"packed_{count}"] for r in rounds]
            aggregate = [sum(t["samples_per_second"] for t in run) for run in runs]
            per_trial = [statistics.mean(t["samples_per_second"] for t in run) for run in runs]
            packing[str(count)] = {
                "aggregate_samples_per_second": _median(aggregate), "per_trial_samples_per_second": _median(per_trial),
                # How much slower each trial runs than alone (2.0: half the speed).
                "slowdown": round(_median(trial) / _median(per_trial), 3),
                "aggregate_vs_one": round(_median(aggregate) / _median(trial), 3),
                "rounds": [[t["samples_per_second"] for t in run] for run in runs],
                "overlap_of_timed_epochs": [_overlap(run) for run in runs]}
        summary["packing"] = packing
        summary["auto_packing"] = auto_packing(packing)
    if rates("limit"):
        summary["limit"] = {"samples_per_second": _median(rates("limit")), "rounds": rates("limit")}
        summary["tuneboard_vs_limit_ratio"] = round(_median(trial) / _median(rates("limit")), 3)
    return summary


def auto_packing(packing: dict) -> dict:
    """What `auto` (workers/host/packing.PackingSearch, the rule the autoscaler runs) settles on given these
    measured levels, and its aggregate against the best fixed packing's. The rule applied to the measured
    figures, not a live autoscaled worker: the same decisions, without its minutes of settling."""
    from workers.host.packing import PackingSearch

    levels = {int(n): found["aggregate_samples_per_second"] for n, found in packing.items()}
    search = PackingSearch(max_level=max(levels))
    while not search.settled and search.level in levels:
        search.observe(levels[search.level])
    best = max(levels, key=levels.get)
    return {"chosen": search.level, "reason": search.reason, "best_fixed": best,
            "auto_vs_best_fixed_packing": round(levels[search.level] / levels[best], 3)}


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="CPU sizes and one round, wherever it runs")
    parser.add_argument("--rounds", type=int, help="rounds of every figure (default 3; 1 with --quick)")
    parser.add_argument("--backends", help="comma-separated, of jax,tensorflow (default: every one installed)")
    parser.add_argument("--figures", default="limit,precision,steps,packing",
                        help="figures beside trial vs plain: limit,precision,steps,packing (default all)")
    parser.add_argument("--primary-only", action="store_true",
                        help="figures 2-4 on the first backend only (the others: trial vs plain)")
    parser.add_argument("--set", default="", metavar="NAME=VALUE,...",
                        help="override sizes (rows, side, batch_size, epochs) or the cnn's fixed values, "
                             "e.g. rows=64000,batch_size=512,filters=32")
    parser.add_argument("--output", help="the JSON's path (default benchmarks/results/gpu-<device>.json)")
    return parser.parse_args(argv)


def sizes(base: dict, overrides: str) -> dict:
    """The sizes with --set's NAME=VALUE pairs applied (numbers and true/false parsed as JSON)."""
    size = {**base, "values": dict(base["values"])}
    for pair in filter(None, overrides.split(",")):
        name, _, raw = pair.partition("=")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        if name in ("rows", "side", "batch_size", "epochs"):
            size[name] = int(value)
        elif name in (*base["values"], *COMMON_VALUES):
            size["values"][name] = value
        else:
            sys.exit(f"--set: unknown size or hyperparameter {name!r}")
    if size["epochs"] < WARMUP_EPOCHS + 2:
        sys.exit(f"--set: at least {WARMUP_EPOCHS + 2} epochs ({WARMUP_EPOCHS} of warm-up, two or more timed)")
    return size


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    began = time.monotonic()
    load_start = _load()
    backends = importable = installed_backends()
    if args.backends:
        backends = [b for b in args.backends.split(",") if b in backends]
    if not backends:
        sys.exit("Neither JAX nor TensorFlow can be imported here: install one of them (with Keras).")
    probes = {b: Runner({}, "cpu").run({"mode": "probe", "backend": b}) for b in backends}
    kind = next((p["kind"] for p in probes.values() if p["kind"] != "cpu"), "cpu")
    # Figures on one kind of device only: a backend that does not see it (a CPU-only TensorFlow on
    # a host whose JAX has CUDA) would measure another machine.
    skipped = {b: f"sees {p['kind']} only, not the {kind}" for b, p in probes.items() if p["kind"] != kind}
    backends = [b for b in backends if b not in skipped]
    device = next(p["name"] for b, p in probes.items() if b in backends)
    size = sizes(CPU_SIZE if args.quick or kind == "cpu" else GPU_SIZE, args.set)
    rounds = args.rounds or (1 if args.quick else 3)
    figures = {f for f in args.figures.split(",") if f}
    mixed = "mixed_float16" if kind == "gpu" else "mixed_bfloat16"
    print(f"{device} ({kind}); backends {backends}, skipped {skipped}; {rounds} rounds; sizes {size}", file=sys.stderr)

    with tempfile.TemporaryDirectory(prefix="tuneboard-gpu-bench-") as tmp:
        folder = Path(tmp)
        embedded = _embedded(folder)
        setup_django(embedded)
        team, user, dataset, arrays = create_dataset(folder, size)
        rows = dataset.split_sizes["train"]
        bench = Bench(Runner(embedded, kind), Studies(team, user, dataset, size, kind), arrays, size, mixed, rows)
        print(f"dataset ready ({dataset.split_sizes}) after {time.monotonic() - began:.0f} s", file=sys.stderr)
        by_backend: dict[str, list[dict]] = {b: [] for b in backends}
        context = {"device": device, "kind": kind, "importable": importable, "probes": probes, "mixed": mixed,
                   "skipped": skipped, "size": size, "dataset": dataset, "quick": args.quick,
                   "load_start": load_start, "began": began}
        for index in range(rounds):
            for position, backend in enumerate(backends):
                wanted = figures if position == 0 or not args.primary_only else set()
                by_backend[backend].append(bench.round(backend, index, wanted))
            # Written after every round, so a run stopped early (a lease running out) keeps what it measured.
            result = compose(context, by_backend, rounds_done=index + 1, rounds=rounds)
            output = write(result, device, args.output)
        shutil.rmtree(folder / "var", ignore_errors=True)
    print(f"wrote {output}", file=sys.stderr)
    print(json.dumps(result))


def compose(context: dict, by_backend: dict[str, list[dict]], *, rounds_done: int, rounds: int) -> dict:
    """The JSON of the rounds run so far (`rounds_done` of `rounds`)."""
    device, kind, importable, probes, mixed, skipped, size, dataset = (context[k] for k in (
        "device", "kind", "importable", "probes", "mixed", "skipped", "size", "dataset"))
    backends = list(by_backend)
    summaries = {b: {"device": probes[b], **summarise(by_backend[b], mixed), "rounds": by_backend[b]}
                 for b in backends}
    primary = summaries[backends[0]]
    both = {"jax", "tensorflow"} <= set(summaries)
    return {
        "device": device,
        "device_kind": kind,
        "cpu_model": _cpu_model(),
        "versions": versions(importable),
        "primary_backend": backends[0],
        "tuneboard_vs_plain_ratio": primary["tuneboard_vs_plain_ratio"],
        "tuneboard_vs_plain_ratio_by_round": primary["tuneboard_vs_plain_ratio_by_round"],
        "tuneboard_vs_plain_cpu_time_ratio": primary["tuneboard_vs_plain_cpu_time_ratio"],
        "mixed_precision_speedup": primary.get("mixed_precision", {}).get("speedup"),
        "mixed_precision_policy": mixed,
        "steps_per_execution_32_speedup": primary.get("steps_per_execution", {}).get("speedup"),
        "packing": {n: {k: v for k, v in found.items() if k not in ("rounds",)}
                    for n, found in primary.get("packing", {}).items()},
        "auto_vs_best_fixed_packing": primary.get("auto_packing", {}).get("auto_vs_best_fixed_packing"),
        "auto_packing": primary.get("auto_packing"),
        "tuneboard_vs_limit_ratio": primary.get("tuneboard_vs_limit_ratio"),
        "jax_vs_tensorflow": {
            "tuneboard": round(summaries["jax"]["tuneboard"]["samples_per_second"]
                               / summaries["tensorflow"]["tuneboard"]["samples_per_second"], 3),
            "plain_fit": round(summaries["jax"]["plain_fit"]["samples_per_second"]
                               / summaries["tensorflow"]["plain_fit"]["samples_per_second"], 3),
        } if both else None,
        "backends": summaries,
        "skipped_backends": skipped,
        "setup": {
            "model": f"Tuneboard's cnn hypermodel with {({**COMMON_VALUES, **size['values']})}",
            "images": f"{size['side']}x{size['side']}x3 uint8, {CLASSES} classes", "rows": size["rows"],
            "split_sizes": dataset.split_sizes, "batch_size": size["batch_size"], "epochs": size["epochs"],
            "timed_epochs": f"{WARMUP_EPOCHS + 1}..{size['epochs']}", "rounds": rounds_done,
            "rounds_planned": rounds, "sizes": "quick" if context["quick"] else kind,
            "cores": _cores(), "threads_per_process": None if kind != "cpu" else {
                str(n): max(1, _cores() // n) for n in (1, *PACKED)},
            "database": "SQLite (embedded mode)", "broker": "none (memory://; trials run in-process)",
        },
        "load": {"before": context["load_start"], "after": _load(),
                 "note": "os.getloadavg() (1, 5, 15 min) of the host; "
                 "other work running beside the benchmark slows every arm alike within a round"},
        "elapsed_seconds": round(time.monotonic() - context["began"], 1),
        "targets": {"tuneboard_vs_plain_ratio": 0.97, "tuneboard_vs_limit_ratio": 0.85,
                    "packing_4_aggregate_vs_one_small_model": 3.0, "auto_vs_best_fixed_packing": 0.9},
    }


def write(result: dict, device: str, path: str | None) -> Path:
    slug = re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-")  # "cpu", "nvidia-h100-80gb-hbm3"
    output = Path(path) if path else RESULTS / f"gpu-{slug}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2) + "\n")
    return output


if __name__ == "__main__":
    main()
