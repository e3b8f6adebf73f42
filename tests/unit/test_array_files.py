"""Arrays on disk: read back a block at a time without the pages piling up in resident memory,
converted without a copy when there is nothing to convert, and written as a .npz numpy reads."""

import io

import numpy as np
import psutil

from experiments.datasets.arrays import BLOCK_BYTES, ArrayWriter, blocks, converted, write_npz

MB = 1024 * 1024


def _file_of_ones(rows: int, columns: int) -> np.ndarray:
    with ArrayWriter(np.float32, (columns,)) as writer:
        block = np.ones((BLOCK_BYTES // (4 * columns), columns), np.float32)
        while writer.n_rows < rows:
            writer.write(block[: rows - writer.n_rows])
        return writer.finish()


def test_reading_128_mb_in_blocks_keeps_resident_memory_near_one_block():
    x = _file_of_ones(32_768, 1024)  # 128 MB
    process = psutil.Process()
    baseline, peak, total = process.memory_info().rss, 0, 0.0
    for block in blocks(x):
        total += float(block.sum())
        peak = max(peak, process.memory_info().rss)
    assert total == 32_768 * 1024
    assert peak - baseline < 24 * MB, f"grew by {(peak - baseline) / MB:.0f} MB"

    # The same pages read straight through the map stay resident: what blocks() prevents.
    assert float(np.asarray(x).sum(dtype=np.float64)) == total
    assert process.memory_info().rss - baseline > 100 * MB


def test_an_array_already_on_disk_in_the_right_type_is_checked_but_not_copied():
    x = _file_of_ones(1000, 8)
    seen = []
    assert converted(x, np.float32, check=lambda block, start: seen.append((start, len(block)))) is x
    assert sum(n for _, n in seen) == 1000 and seen[0][0] == 0


def test_other_arrays_are_converted_to_a_new_file():
    x = np.arange(12, dtype=np.int64).reshape(6, 2)
    out = converted(x, np.float32)
    assert isinstance(out, np.memmap) and out.dtype == np.float32 and out.tolist() == x.tolist()
    doubled = converted(x, np.float32, transform=lambda block: (block * 2).astype(np.float32))
    assert doubled.tolist() == (x * 2).tolist()


def test_write_npz_writes_whole_arrays_and_chosen_rows_that_numpy_loads():
    x = np.arange(150, dtype=np.float32).reshape(50, 3)
    texts = np.array(["a", "bb", "ccc"] * 10)
    picked = np.array([0, 7, 49])
    buffer = io.BytesIO()
    write_npz(buffer, {"x": (x, None), "some": (x, picked), "texts": (texts, None), "none": (x, picked[:0])})
    buffer.seek(0)
    with np.load(buffer, allow_pickle=False) as loaded:
        assert np.array_equal(loaded["x"], x) and np.array_equal(loaded["some"], x[picked])
        assert loaded["texts"].tolist() == texts.tolist() and loaded["none"].shape == (0, 3)
