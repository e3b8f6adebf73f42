"""A job's log keeps its first and last lines within the bounds and counts what it cut, whatever
is printed (a storm of lines, one huge line without a newline, carriage-return progress bars)."""

import random

from workers.host.job_logs import BoundedLog


def _text(bounded: BoundedLog) -> str:
    snapshot = bounded.snapshot()
    return snapshot.head + snapshot.tail


def test_a_print_storm_keeps_the_first_and_last_lines_and_counts_the_rest():
    bounded = BoundedLog(head_bytes=1000, tail_bytes=2000, clock=lambda: 0)
    for number in range(10_000):
        bounded.write(f"line {number}\n")
    snapshot = bounded.snapshot()
    assert len(snapshot.head.encode()) <= 1000 and len(snapshot.tail.encode()) <= 2000
    assert snapshot.head.splitlines()[0].endswith(" line 0") and snapshot.tail.splitlines()[-1].endswith(" line 9999")
    kept = len(snapshot.head.splitlines()) + len(snapshot.tail.splitlines())
    assert snapshot.lines == 10_000 and snapshot.cut_lines == 10_000 - kept
    numbers = [int(line.rsplit(" ", 1)[1]) for line in (snapshot.head + snapshot.tail).splitlines()]
    assert numbers == sorted(numbers), "in the order printed"


def test_partial_writes_make_one_line_and_carriage_returns_split_them():
    bounded = BoundedLog(head_bytes=10_000, tail_bytes=10_000, clock=lambda: 0)
    bounded.write("epoch ")
    bounded.write("1 done\n")
    bounded.write("10%\r50%\r100%\n\n   \n")
    bounded.write("no newline yet")
    assert [line.split(" ", 1)[1] for line in _text(bounded).splitlines()] == ["epoch 1 done", "10%", "50%", "100%"]
    bounded.flush_partial()
    assert _text(bounded).splitlines()[-1].endswith(" no newline yet")


def test_a_huge_line_without_a_newline_is_bounded_too():
    bounded = BoundedLog(head_bytes=100, tail_bytes=1000, clock=lambda: 0)
    for _ in range(2_000):  # 2 MB without a newline: a line each time enough has gathered, each cut
        bounded.write("x" * 999)
    snapshot = bounded.snapshot()
    assert len(bounded.partial) <= 1000 and len(snapshot.tail.encode()) <= 1000
    assert "characters of this line cut]" in snapshot.tail and snapshot.cut_lines > 0


def test_lines_keep_the_second_they_were_written_in_and_a_block_is_cut_at_its_lines():
    now = [3600.0]
    bounded = BoundedLog(head_bytes=40, tail_bytes=300, clock=lambda: now[0])
    for second in range(5):
        now[0] = 3600.0 + second
        for number in range(10):
            bounded.write(f"s{second} n{number}\n")
    snapshot = bounded.snapshot()
    assert snapshot.head.splitlines()[0].endswith(":00:00 s0 n0")  # its own second's stamp (any time zone)
    tail = snapshot.tail.splitlines()
    assert tail[-1].endswith(":00:04 s4 n9") and tail[0].split(" ", 1)[1].startswith("s")
    assert len(snapshot.tail.encode()) <= 300 and snapshot.lines == 50
    kept = len(snapshot.head.splitlines()) + len(tail)
    assert snapshot.cut_lines == 50 - kept and snapshot.cut_bytes > 0


def test_a_line_keeps_its_seconds_stamp_across_the_writers_drains():
    now = [3614.0]
    bounded = BoundedLog(head_bytes=10_000, tail_bytes=10_000, clock=lambda: now[0])
    bounded.write("epoch 9\n")
    bounded.snapshot()  # the writer thread drains
    bounded.write("epoch 10\n")  # the same second, after the drain
    now[0] = 3615.0
    bounded.write("epoch 11\n")
    stamps = [line.split(" ", 1)[0][-5:] for line in bounded.snapshot().head.splitlines()]
    assert stamps == ["00:14", "00:14", "00:15"]  # never a later line with an earlier time


def test_a_tail_of_multi_byte_lines_is_filled_to_its_bound_in_bytes():
    bounded = BoundedLog(head_bytes=10, tail_bytes=3000, clock=lambda: 0)
    bounded.write("".join(f"{'█' * 20} {number}\n" for number in range(200)))  # 3 bytes a block character
    snapshot = bounded.snapshot()
    size = len(snapshot.tail.encode())
    assert 3000 - 75 < size <= 3000, size  # within one line of the bound, not one line in all
    assert snapshot.tail.splitlines()[-1].endswith(" 199")
    assert snapshot.cut_bytes + size + len(snapshot.head.encode()) == sum(
        len(f"00:00:00 {'█' * 20} {n}\n".encode()) for n in range(200))


def test_nul_and_lone_surrogates_are_stored_readable():
    bounded = BoundedLog(head_bytes=1000, tail_bytes=1000, clock=lambda: 0)
    bounded.write("a\x00b\n")
    bounded.write("bad \udcff byte\n")
    lines = [line.split(" ", 1)[1] for line in _text(bounded).splitlines()]
    assert lines == ["a\\x00b", "bad ? byte"]
    _text(bounded).encode("utf-8")  # no surrogate left


def test_whatever_the_writes_the_log_is_the_first_and_last_lines_of_what_was_printed():
    rng = random.Random(7)
    for case in range(30):
        bounded = BoundedLog(head_bytes=rng.choice([50, 300, 2000]), tail_bytes=rng.choice([400, 1500, 5000]),
                             clock=lambda: 0)
        bounded.DRAIN_CHARS = rng.choice([1, 64, 4096])
        printed = []
        for number in range(rng.randrange(1, 800)):
            line = f"c{case} l{number} " + rng.choice("yé█") * rng.randrange(0, 60)  # 1, 2 or 3 bytes a character
            printed.append(line)
            half = len(line) // 2
            for part in (line[:half], line[half:] + "\n") if rng.random() < 0.3 else (line + "\n",):
                bounded.write(part)
            if rng.random() < 0.05:
                bounded.snapshot()  # the writer thread's snapshots come at any moment
        snapshot = bounded.snapshot()
        head = [line.split(" ", 1)[1] for line in snapshot.head.splitlines()]
        tail = [line.split(" ", 1)[1] for line in snapshot.tail.splitlines()]
        assert head == printed[: len(head)] and (not tail or tail == printed[-len(tail):])
        assert snapshot.lines == len(printed) and snapshot.cut_lines == len(printed) - len(head) - len(tail)
        assert len(snapshot.tail.encode()) <= bounded.tail_bytes or len(tail) == 1
        assert len(snapshot.head.encode()) <= bounded.head_bytes
        stamped = sum(len(f"00:00:00 {line}\n".encode()) for line in printed)
        assert len(snapshot.head.encode()) + len(snapshot.tail.encode()) + snapshot.cut_bytes == stamped
