"""What a trial or job prints while it runs, and what it uses of its host, kept for its page:
stdout, stderr (Python warnings go there), log records of our code and of every library at
WARNING and above, one line per epoch and the traceback of a crash, each line with its time;
and every TUNEBOARD_SYSTEM_SAMPLE_SECONDS a system sample (workers/host/system_metrics.py). The
log is bounded (the first JOB_LOG_HEAD_KB and the last JOB_LOG_TAIL_KB, with a count of what was
cut between), and a thread takes the samples and writes both every JOB_LOG_FLUSH_SECONDS, so
printing costs the training thread an append to memory and a slow database never holds it up
(a failed write is retried with the next one)."""

import collections
import logging
import sys
import threading
import time
import traceback
from contextlib import contextmanager

from django.conf import settings
from django.utils import timezone

from experiments.services.connections import with_db_retry
from experiments.services.job_logs import LogSnapshot, job_log_open, job_log_write, job_samples_add
from workers.host.heartbeat import Heartbeat
from workers.host.system_metrics import SystemSampler

log = logging.getLogger(__name__)
# Celery re-logs what a child prints under this name: the tee has the line already.
CELERY_REDIRECT = "celery.redirected"
OUR_CODE = ("workers", "experiments")
MAX_UNWRITTEN_SAMPLES = 720


class BoundedLog:
    """Lines with their time: the first `head_bytes` kept as they came, then the last `tail_bytes`;
    what falls out of the tail is counted, not kept."""

    def __init__(self, head_bytes: int, tail_bytes: int, clock=time.time):
        self.head_bytes, self.tail_bytes, self.clock = head_bytes, tail_bytes, clock
        self.head: list[str] = []
        self.head_size = 0
        self.tail: collections.deque[str] = collections.deque()
        self.tail_size = 0
        self.lines = self.cut_lines = self.cut_bytes = 0
        self.version = 0  # bumped by every change, so the writer skips an unchanged log
        self.lock = threading.Lock()
        self.partial = ""  # a write without its newline yet

    def write(self, text: str) -> None:
        with self.lock:
            text = self.partial + text.replace("\r\n", "\n").replace("\r", "\n")
            *complete, self.partial = text.split("\n")
            if len(self.partial) > self.tail_bytes:  # a print storm without newlines
                complete.append(self.partial)
                self.partial = ""
            for line in complete:
                if line.strip():
                    self._add(line)

    def _add(self, line: str) -> None:
        longest = self.tail_bytes // 4  # so the tail always holds a few lines
        if len(line) > longest:
            line = f"{line[:longest]} [... {len(line) - longest:,} characters of this line cut]"
        # PostgreSQL's text holds neither NUL nor lone surrogates: a line with them is stored readable.
        line = line.replace("\x00", "\\x00").encode("utf-8", "replace").decode("utf-8")
        stamped = f"{time.strftime('%H:%M:%S', time.localtime(self.clock()))} {line}\n"
        size = len(stamped.encode("utf-8"))
        self.lines += 1
        self.version += 1
        if not self.tail and self.head_size + size <= self.head_bytes:
            self.head.append(stamped)
            self.head_size += size
            return
        self.tail.append(stamped)
        self.tail_size += size
        while self.tail_size > self.tail_bytes and len(self.tail) > 1:
            dropped = self.tail.popleft()
            dropped_size = len(dropped.encode("utf-8"))
            self.tail_size -= dropped_size
            self.cut_lines += 1
            self.cut_bytes += dropped_size

    def flush_partial(self) -> None:
        with self.lock:
            if self.partial.strip():
                self._add(self.partial)
            self.partial = ""

    def snapshot(self) -> LogSnapshot:
        with self.lock:
            return LogSnapshot(head="".join(self.head), tail="".join(self.tail), lines=self.lines,
                               cut_lines=self.cut_lines, cut_bytes=self.cut_bytes)


class _Tee:
    """Stands in for sys.stdout or sys.stderr: the bounded log gets a copy, the stream the rest."""

    def __init__(self, stream, bounded: BoundedLog):
        self._stream, self._bounded = stream, bounded

    def write(self, text) -> int:
        self._bounded.write(str(text))
        return self._stream.write(text)

    def __getattr__(self, name):  # flush, isatty, fileno, encoding: the real stream's
        return getattr(self._stream, name)


class _Records(logging.Handler):
    def __init__(self, bounded: BoundedLog):
        super().__init__(logging.INFO)
        self.bounded = bounded
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def filter(self, record) -> bool:
        if record.name == CELERY_REDIRECT:
            return False
        return record.levelno >= logging.WARNING or record.name.split(".")[0] in OUR_CODE

    def emit(self, record) -> None:
        try:
            self.bounded.write(self.format(record) + "\n")
        except Exception:  # a log line must never fail the job
            self.handleError(record)


class JobLogCapture:
    """The bounded log of one run and its system samples, and the thread that takes the samples
    and writes both. `crashed(exc)` adds a traceback."""

    def __init__(self, log_id: int, sampler: SystemSampler | None = None):
        self.log_id = log_id
        self.bounded = BoundedLog(settings.JOB_LOG_HEAD_KB * 1024, settings.JOB_LOG_TAIL_KB * 1024)
        self.written = -1
        self.sampler = sampler
        self.samples: list[tuple] = []
        self.next_sample = time.monotonic() + settings.SYSTEM_SAMPLE_SECONDS
        self.writer = Heartbeat(self.write, settings.JOB_LOG_FLUSH_SECONDS, name=f"job-log-{log_id}")

    def take_sample(self) -> None:
        if self.sampler is None or time.monotonic() < self.next_sample:
            return
        self.next_sample = time.monotonic() + settings.SYSTEM_SAMPLE_SECONDS
        try:
            self.samples.append((timezone.now(), self.sampler.sample()))
            del self.samples[:-MAX_UNWRITTEN_SAMPLES]  # a database down for long: keep the newest
        except Exception:  # a figure the host will not give must not stop the log
            log.warning("a system sample failed", exc_info=True)

    def write(self, *, running: bool = True) -> None:
        self.take_sample()
        if self.samples:
            # Kept for the next write if this one fails: samples are small and come every few seconds.
            job_samples_add(log_id=self.log_id, samples=self.samples)
            self.samples = []
        version = self.bounded.version
        if version == self.written and running:
            return
        job_log_write(log_id=self.log_id, snapshot=self.bounded.snapshot(), running=running)
        self.written = version

    def crashed(self, exc: BaseException) -> None:
        self.bounded.write("".join(traceback.format_exception(exc)))


def _sampler() -> SystemSampler | None:
    try:
        return SystemSampler()
    except Exception:
        log.warning("no system samples for this run", exc_info=True)
        return None


@contextmanager
def job_log(*, kind: str, job_id: int, attempt: int):
    """Capture what runs inside into the log of this run of the job; yields the capture."""
    try:
        log_id = with_db_retry(job_log_open, kind=kind, job_id=job_id, attempt=attempt)
    except Exception:
        log.warning("no log for %s %s: it runs without one", kind, job_id, exc_info=True)
        yield None
        return
    capture = JobLogCapture(log_id, _sampler())
    records = _Records(capture.bounded)
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Tee(stdout, capture.bounded), _Tee(stderr, capture.bounded)
    logging.getLogger().addHandler(records)
    capture.writer.start()
    try:
        yield capture
    finally:
        sys.stdout, sys.stderr = stdout, stderr
        logging.getLogger().removeHandler(records)
        capture.writer.stop()
        capture.bounded.flush_partial()
        capture.next_sample = 0  # every run ends with a sample, however short it was
        try:
            with_db_retry(capture.write, running=False)
        except Exception:
            log.warning("the last lines of %s %s's log were not stored", kind, job_id, exc_info=True)
