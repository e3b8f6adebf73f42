"""A job's log keeps its first and last lines within the bounds and counts what it cut, whatever
is printed (a storm of lines, one huge line without a newline, carriage-return progress bars)."""

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
    for _ in range(50):
        bounded.write("x" * 999)
    snapshot = bounded.snapshot()
    assert len(bounded.partial) <= 1000 and len(snapshot.tail.encode()) <= 1000
    assert "characters of this line cut]" in snapshot.tail and snapshot.cut_lines > 0


def test_nul_and_lone_surrogates_are_stored_readable():
    bounded = BoundedLog(head_bytes=1000, tail_bytes=1000, clock=lambda: 0)
    bounded.write("a\x00b\n")
    bounded.write("bad \udcff byte\n")
    lines = [line.split(" ", 1)[1] for line in _text(bounded).splitlines()]
    assert lines == ["a\\x00b", "bad ? byte"]
    _text(bounded).encode("utf-8")  # no surrogate left
