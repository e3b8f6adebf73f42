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
    what falls out of the tail is counted, not kept.

    A write costs the printing thread a clock read and a deque append (thread-safe without a lock):
    the text waits, with its second when that changed (a tuple once a second; the other texts are
    plain str, which the garbage collector does not track, so a storm adds no collections over a
    large training heap), until DRAIN_CHARS have gathered or the writer thread takes a snapshot; it is then cut into
    lines, stamped and bounded in blocks with C-speed string operations, so a print storm of
    millions of lines is mostly counted, not handled line by line."""

    DRAIN_CHARS = 256 * 1024

    def __init__(self, head_bytes: int, tail_bytes: int, clock=time.time):
        self.head_bytes, self.tail_bytes, self.clock = head_bytes, tail_bytes, clock
        self.head: list[str] = []
        self.head_size = 0
        # Blocks of stamped lines, oldest first: [text, its bytes, its lines].
        self.tail: collections.deque[list] = collections.deque()
        self.tail_size = 0
        self.lines = self.cut_lines = self.cut_bytes = 0
        self.lock = threading.Lock()
        # Texts not drained yet: the first of each second as (second, text), one append, so no other
        # thread's text slips between a second and its text; the rest of that second as plain str.
        self.pending: collections.deque[tuple[int, str] | str] = collections.deque()
        self.pending_second = -1
        self.drained_second = -1  # the second of the last (second, text) a drain took: later texts are of it
        self.pending_chars = 0  # about: two threads add to it unlocked, and it only decides when to drain
        self.partial = ""  # a write without its newline yet

    def write(self, text: str) -> None:
        second = int(self.clock())
        if second != self.pending_second:
            self.pending_second = second
            self.pending.append((second, text))
        else:
            self.pending.append(text)
        self.pending_chars += len(text)
        if self.pending_chars >= self.DRAIN_CHARS:
            with self.lock:
                self._drain()

    def _drain(self) -> None:
        """Take what waits, a second's texts at a time, in the order written (the caller holds the lock)."""
        self.pending_chars = 0
        groups: list[tuple[int, list[str]]] = []
        while True:
            try:
                item = self.pending.popleft()
            except IndexError:
                break
            if isinstance(item, tuple):
                groups.append((item[0], [item[1]]))
                self.drained_second = item[0]
            elif groups:
                groups[-1][1].append(item)
            else:  # written after an earlier drain took its second's marker: of that second
                groups.append((self.drained_second, [item]))
        for second, texts in groups:
            text = self.partial + "".join(texts)
            if "\r" in text:
                text = text.replace("\r\n", "\n").replace("\r", "\n")
            end = text.rfind("\n")
            complete, self.partial = (text[:end], text[end + 1:]) if end >= 0 else ("", text)
            if len(self.partial) > self.tail_bytes:  # a print storm without newlines
                complete, self.partial = f"{complete}\n{self.partial}" if complete else self.partial, ""
            if complete:
                self._add_block(second, complete)

    def _add_block(self, second: int, block: str) -> None:
        if not block.isascii() or "\x00" in block:
            # PostgreSQL's text holds neither NUL nor lone surrogates: a line with them is stored readable.
            block = block.replace("\x00", "\\x00").encode("utf-8", "replace").decode("utf-8")
        lines = [line for line in block.split("\n") if line.strip()]
        if not lines:
            return
        longest = self.tail_bytes // 4  # so the tail always holds a few lines
        if max(map(len, lines)) > longest:
            lines = [f"{line[:longest]} [... {len(line) - longest:,} characters of this line cut]"
                     if len(line) > longest else line for line in lines]
        stamp = time.strftime("%H:%M:%S ", time.localtime(second))
        self.lines += len(lines)
        if not self.tail and self.head_size < self.head_bytes:
            lines = self._fill_head(stamp, lines)
            if not lines:
                return
        text = stamp + f"\n{stamp}".join(lines) + "\n"
        size = len(text) if text.isascii() else len(text.encode("utf-8"))
        self.tail.append([text, size, len(lines)])
        self.tail_size += size
        self._trim_tail()

    def _fill_head(self, stamp: str, lines: list[str]) -> list[str]:
        """Keep lines in the head while they fit (the first KB only: line by line is cheap there); the rest."""
        for index, line in enumerate(lines):
            stamped = f"{stamp}{line}\n"
            size = len(stamped.encode("utf-8"))
            if self.head_size + size > self.head_bytes:
                self.head_size = self.head_bytes  # full: later lines go to the tail, even short ones
                return lines[index:]
            self.head.append(stamped)
            self.head_size += size
        return []

    def _trim_tail(self) -> None:
        """Cut the oldest lines until the tail fits, always keeping its newest line. Positions are
        bytes: an ASCII block is searched as it is, any other as its UTF-8 (a newline is never
        inside a multi-byte character, so a cut at one decodes cleanly)."""
        while self.tail_size > self.tail_bytes:
            text, size, count = self.tail[0]
            data = text if len(text) == size else text.encode("utf-8")
            newline = "\n" if isinstance(data, str) else b"\n"
            excess = self.tail_size - self.tail_bytes
            if len(self.tail) == 1:  # the newest block: its last line stays whatever its size
                last_line = data.rfind(newline, 0, len(data) - 1) + 1
                if last_line == 0:
                    return
                cut_at = data.find(newline, min(excess, last_line) - 1) + 1
            else:
                cut_at = (data.find(newline, excess - 1) + 1 or len(data)) if excess < size else len(data)
            if cut_at >= len(data):
                self.tail.popleft()
                self.tail_size -= size
                self._count_cut(size, count)
                continue
            cut, rest = data[:cut_at], data[cut_at:]
            cut_count = cut.count(newline)
            self.tail[0] = [rest if isinstance(rest, str) else rest.decode("utf-8"), size - cut_at, count - cut_count]
            self.tail_size -= cut_at
            self._count_cut(cut_at, cut_count)

    def _count_cut(self, size: int, count: int) -> None:
        self.cut_lines += count
        self.cut_bytes += size

    def flush_partial(self) -> None:
        with self.lock:
            self._drain()
            if self.partial.strip():
                self._add_block(int(self.clock()), self.partial)
            self.partial = ""

    def snapshot(self) -> LogSnapshot:
        with self.lock:
            self._drain()
            return LogSnapshot(head="".join(self.head), tail="".join(block[0] for block in self.tail),
                               lines=self.lines, cut_lines=self.cut_lines, cut_bytes=self.cut_bytes)


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
        self.dropped_samples = 0
        self.next_sample = time.monotonic() + settings.SYSTEM_SAMPLE_SECONDS
        self.writer = Heartbeat(self.write, settings.JOB_LOG_FLUSH_SECONDS, name=f"job-log-{log_id}")

    def take_sample(self) -> None:
        if self.sampler is None or time.monotonic() < self.next_sample:
            return
        self.next_sample = time.monotonic() + settings.SYSTEM_SAMPLE_SECONDS
        try:
            self.samples.append((timezone.now(), self.sampler.sample()))
            if len(self.samples) > MAX_UNWRITTEN_SAMPLES:  # a database down for long: keep the newest, count the rest
                self.dropped_samples += len(self.samples) - MAX_UNWRITTEN_SAMPLES
                del self.samples[:-MAX_UNWRITTEN_SAMPLES]
        except Exception:  # a figure the host will not give must not stop the log
            log.warning("a system sample failed", exc_info=True)

    def write(self, *, running: bool = True) -> None:
        self.take_sample()
        if self.samples:
            # Kept for the next write if this one fails: samples are small and come every few seconds.
            job_samples_add(log_id=self.log_id, samples=self.samples)
            self.samples = []
            if self.dropped_samples:  # said once the database takes writes again
                self.bounded.write(f"WARNING {__name__}: {self.dropped_samples} system samples were dropped while "
                                   "the database did not take them\n")
                self.dropped_samples = 0
        snapshot = self.bounded.snapshot()
        if snapshot.lines == self.written and running:
            return  # nothing new since the last write
        job_log_write(log_id=self.log_id, snapshot=snapshot, running=running)
        self.written = snapshot.lines

    def crashed(self, exc: BaseException) -> None:
        self.bounded.write("".join(traceback.format_exception(exc)))


def _sampler() -> SystemSampler | None:
    try:
        return SystemSampler()
    except Exception:
        log.warning("no system samples for this run", exc_info=True)
        return None


def _node_name() -> str:
    """The Celery node this child serves ("gpu1@host"), or "" outside a task."""
    from celery import current_task

    return getattr(getattr(current_task, "request", None), "hostname", None) or ""


@contextmanager
def job_log(*, kind: str, job_id: int, attempt: int):
    """Capture what runs inside into the log of this run of the job; yields the capture."""
    try:
        log_id = with_db_retry(job_log_open, kind=kind, job_id=job_id, attempt=attempt, worker=_node_name())
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
