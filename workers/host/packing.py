"""Several trials per GPU: a fixed number (TUNEBOARD_TRIALS_PER_GPU=N), or `auto`, which keeps adding trials to
each GPU while the samples/s all of them train together still grows by a margin and their memory fits.

`auto` runs in the worker's main process as Celery's autoscaler (`--autoscale`): the children append each epoch's
samples/s to a host-local ledger, the scaler sums the fresh figures per GPU and sets the pool to that many
children a GPU. Each child's memory is bounded so packed trials never push each other out (child_memory_env)."""

import fcntl
import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from celery.worker.autoscale import Autoscaler

log = logging.getLogger(__name__)

SETTING = "TUNEBOARD_TRIALS_PER_GPU"
MAX_SETTING = "TUNEBOARD_MAX_TRIALS_PER_GPU"
GROWTH_MARGIN = 0.10  # a level must train this much faster in total than the one before to be kept
MEMORY_SHARE = 0.9  # of a GPU's memory its packed trials may use together
CUDA_CONTEXT_MB = 512  # what a process's CUDA context takes of a GPU beside its allocator's pool
FRESH_SECONDS = 600  # a child's figure older than this is not counted (its trial ended or stalled)


def trials_per_gpu(environ=os.environ) -> int | str:
    """TUNEBOARD_TRIALS_PER_GPU: a whole number of at least 1 (default 1) or "auto"."""
    raw = str(environ.get(SETTING, "1")).strip().lower() or "1"
    if raw == "auto":
        return "auto"
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{SETTING} must be a whole number of at least 1 or auto, not {raw!r}.")
    return int(raw)


def max_trials_per_gpu(environ=os.environ) -> int:
    raw = str(environ.get(MAX_SETTING, "8")).strip() or "8"
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{MAX_SETTING} must be a whole number of at least 1, not {raw!r}.")
    return int(raw)


def packing_record(environ=os.environ) -> dict:
    """The Workers page's line at the worker's start: {} without GPUs."""
    from workers.host.devices import discover_gpus

    if not discover_gpus(environ):
        return {}
    setting = trials_per_gpu(environ)
    if setting == "auto":
        return {"setting": "auto", "trials_per_gpu": 1, "reason": PackingSearch().reason}
    return {"setting": str(setting), "trials_per_gpu": setting, "reason": f"{SETTING}={setting}"}


def child_memory_env(backend: str, packed: int | str, environ) -> dict:
    """What bounds one child's GPU memory when `packed` trials share its GPU (set before the backend loads):
    JAX takes its share of the GPU as the allocator's limit; TensorFlow a logical device of that size
    (tf_memory_limit_mb). `auto` packs only while the measured memory fits, so its children grow as they need."""
    if backend != "jax" or packed == "auto" or packed <= 1 or memory_fraction(environ) is not None:
        return {}
    # The older name only: every JAX reads it, and jaxlib refuses to start its GPU backend when both are set.
    return {FRACTION_OLD: f"{MEMORY_SHARE / packed:.3f}"}


FRACTION_NEW, FRACTION_OLD = "XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION"


def memory_fraction(environ=os.environ) -> float | None:
    """The JAX allocator's share of the GPU this process was given, under either of its names."""
    raw = environ.get(FRACTION_NEW) or environ.get(FRACTION_OLD)
    try:
        return float(raw) if raw else None
    except ValueError:
        return None


def tf_memory_limit_mb(total_mb: int, packed: int | str) -> int | None:
    """A TensorFlow child's logical GPU size in MB when `packed` trials share the GPU; None: TensorFlow's default
    (one trial: the whole GPU; auto: memory growth)."""
    if packed == "auto" or packed <= 1:
        return None
    # TensorFlow reserves the whole logical GPU at start; each process's CUDA context lies outside it.
    return max(256, int(total_mb * MEMORY_SHARE / packed) - CUDA_CONTEXT_MB)


@dataclass
class PackingSearch:
    """Where `auto` stands: it doubles the trials per GPU while the total samples/s grows by GROWTH_MARGIN and the
    measured memory of a trial times the next level fits in MEMORY_SHARE of the GPU; then it settles on the best."""

    max_level: int = 8
    level: int = 1
    measured: dict[int, float] = field(default_factory=dict)  # trials per GPU -> total samples/s measured
    settled: bool = False
    reason: str = "measuring 1 trial per GPU"

    def observe(self, total: float, *, trial_bytes: int | None = None, gpu_bytes: int | None = None) -> int:
        """The level's total samples/s (and a trial's peak device memory, the GPU's size, where known); returns
        the trials per GPU to run next."""
        if self.settled:
            return self.level
        self.measured[self.level] = total
        previous = self.level // 2
        if previous and total < (1 + GROWTH_MARGIN) * self.measured[previous]:
            gain = total / self.measured[previous] if self.measured[previous] else 0.0
            return self._settle(previous, f"{self.level} trials per GPU trained {gain:.2f}× as fast in total as "
                                          f"{previous}, under the {1 + GROWTH_MARGIN:.2f}× it takes to keep them")
        ahead = self.level * 2
        if ahead > self.max_level:
            return self._settle(self.level, f"{self.level} trials per GPU is the most allowed ({MAX_SETTING})")
        if trial_bytes and gpu_bytes and ahead * trial_bytes > MEMORY_SHARE * gpu_bytes:
            return self._settle(self.level, f"{ahead} trials of {trial_bytes / 2**30:.1f} GiB would not fit in "
                                            f"{MEMORY_SHARE:.0%} of the GPU's {gpu_bytes / 2**30:.1f} GiB")
        gain = f", {total / self.measured[previous]:.2f}× {previous}'s" if previous else ""
        self.level = ahead
        self.reason = f"measuring {ahead} trials per GPU ({ahead // 2} trained {total:,.0f} samples/s{gain})"
        return ahead

    def _settle(self, level: int, why: str) -> int:
        self.level, self.settled, self.reason = level, True, f"{level} trial{'s' if level > 1 else ''} per GPU: {why}"
        return level


class ThroughputLedger:
    """Each child's latest samples/s, device memory and GPU, one small file a child in a host-local folder: the
    children write it at each epoch's end, the main process reads it."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def write(self, *, pid: int, gpus: str, samples_per_second: float, device_bytes: int | None,
              clock=time.time) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{pid}.json"
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps({"gpus": gpus, "samples_per_second": samples_per_second,
                                         "device_bytes": device_bytes, "time": clock()}))
        temporary.replace(path)  # a reader never sees half a file

    def clear(self) -> None:
        for path in self.folder.glob("*.json"):
            path.unlink(missing_ok=True)

    def fresh(self, clock=time.time) -> list[dict]:
        now, rows = clock(), []
        for path in self.folder.glob("*.json"):
            try:
                row = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if now - row.get("time", 0) <= FRESH_SECONDS:
                rows.append(row)
        return rows


def per_gpu(rows: list[dict]) -> tuple[float, int | None]:
    """The mean over GPUs of the samples/s their trials train together, and the largest trial's device memory."""
    totals: dict[str, float] = {}
    for row in rows:
        totals[row["gpus"]] = totals.get(row["gpus"], 0.0) + float(row["samples_per_second"])
    memory = [row["device_bytes"] for row in rows if row.get("device_bytes")]
    return (sum(totals.values()) / len(totals) if totals else 0.0), (max(memory) if memory else None)


class PackingAutoscaler(Autoscaler):
    """Celery's autoscaler (CELERY_WORKER_AUTOSCALER), sized by PackingSearch on a GPU worker with
    TUNEBOARD_TRIALS_PER_GPU=auto: the pool holds (GPU groups) × (trials per GPU) children, and a level is judged
    once each of its children has reported an epoch. Anywhere else it is Celery's own (by queued messages)."""

    def __init__(self, pool, max_concurrency, min_concurrency=0, worker=None, **kwargs):
        super().__init__(pool, max_concurrency, min_concurrency, worker=worker, **kwargs)
        from workers.host.devices import discover_gpus, gpus_per_child

        gpus = discover_gpus()
        self.active = trials_per_gpu() == "auto" and bool(gpus)
        self.groups = max(1, len(gpus) // gpus_per_child())
        self.search = PackingSearch(max_level=min(max_trials_per_gpu(), max(1, max_concurrency // self.groups)))
        self.ledger = ThroughputLedger(ledger_folder(getattr(worker, "hostname", "") or "worker"))
        self.ledger.clear()  # an earlier run of this node's figures are not this one's
        self.gpu_bytes = gpu_memory_bytes()

    def _maybe_scale(self, req=None):
        if not self.active:
            return super()._maybe_scale(req)
        rows = self.ledger.fresh()
        if not self.search.settled and len(rows) >= self.groups * self.search.level:
            total, trial_bytes = per_gpu(rows)
            self.search.observe(total, trial_bytes=trial_bytes, gpu_bytes=self.gpu_bytes)
            self.ledger.clear()  # the next level is judged on its own figures
            publish(self.worker, self.search)
        wanted = self.groups * self.search.level
        if wanted > self.processes:
            self.scale_up(wanted - self.processes)
            return True
        if wanted < self.processes:
            self._shrink(self.processes - wanted)
            return True
        return False


def ledger_folder(node: str) -> Path:
    from django.conf import settings

    return Path(settings.VAR_DIR) / "packing" / node.replace("/", "_")


def record_epoch(samples_per_second: float, environ=os.environ) -> None:
    """A child's epoch figure for its worker's `auto` packing; nothing elsewhere. Never fails the trial."""
    try:
        if trials_per_gpu(environ) != "auto" or not environ.get("CUDA_VISIBLE_DEVICES"):
            return
        from celery import current_task

        from workers.host.system_metrics import backend_memory

        node = getattr(getattr(current_task, "request", None), "hostname", None)
        if not node:
            return
        peaks = [m["peak_bytes_in_use"] for m in backend_memory() if m.get("peak_bytes_in_use")]
        ThroughputLedger(ledger_folder(node)).write(pid=os.getpid(), gpus=environ["CUDA_VISIBLE_DEVICES"],
                                                    samples_per_second=samples_per_second,
                                                    device_bytes=max(peaks) if peaks else None)
    except Exception:
        log.warning("the packing figure of this epoch was not recorded", exc_info=True)


def gpu_memory_bytes() -> int | None:
    """The first GPU's memory from NVML (the GPUs of one host are alike), None without one."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).total)
    except Exception:  # no library, driver or GPU
        return None


def pin_packed_child(index: int) -> int | str:
    """Pin this worker child (pool index `index`) to its GPUs, TUNEBOARD_TRIALS_PER_GPU of them sharing each; returns
    how many trials share its GPU (1 without one), for its memory bound (backends.child.configure_child)."""
    from workers.host.devices import discover_gpus, gpus_per_child, pin_child

    packed, gpus = trials_per_gpu(), discover_gpus()
    if packed == "auto" and gpus:
        index = auto_child_slot(max(1, len(gpus) // gpus_per_child()))
    pinned = pin_child(index, gpus, packed=packed if isinstance(packed, int) else max_trials_per_gpu())
    return packed if pinned else 1


def auto_child_slot(groups: int, folder: Path | None = None, pid: int | None = None) -> int:
    """The GPU group a new child of an `auto` worker takes: the one with the fewest live children, chosen under a
    lock. (A child's pool index would not do: the autoscaler stops whichever children are idle, so indices can
    leave one GPU crowded and another empty.)"""
    from django.conf import settings

    folder = folder or Path(settings.VAR_DIR) / "packing" / f"children-of-{os.getppid()}"
    pid = pid or os.getpid()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "choose.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        counts = [0] * groups
        for path in folder.glob("child-*"):
            if _alive(int(path.name.removeprefix("child-"))):
                counts[int(path.read_text() or 0) % groups] += 1
            else:
                path.unlink(missing_ok=True)
        group = counts.index(min(counts))
        (folder / f"child-{pid}").write_text(str(group))
    return group


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def gpu_free_bytes(environ=os.environ) -> int | None:
    """What the first GPU this child sees has free, all processes counted (NVML); None without NVML."""
    try:
        import pynvml

        from workers.host.system_metrics import visible_gpu_indices

        pynvml.nvmlInit()
        indices = visible_gpu_indices(pynvml.nvmlDeviceGetCount(), environ)
        return int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(indices[0])).free)
    except Exception:  # no library, driver or GPU
        return None


def publish(worker, search: PackingSearch) -> None:
    """The Workers page's line: trials per GPU and why."""
    from experiments.services.fleet import worker_packing

    try:
        worker_packing(name=worker.hostname, packing={"setting": "auto", "trials_per_gpu": search.level,
                                                      "reason": search.reason})
    except Exception:  # the page's line must never stop the scaler
        log.warning("the packing of %s was not stored", getattr(worker, "hostname", "?"), exc_info=True)
