"""Example images of an image dataset, drawn once per dataset in the web process and kept on disk by the arrays'
hash, reading only the rows drawn (docs/design/datasets-and-models.md)."""

from __future__ import annotations

import io
import os
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from django.conf import settings
from PIL import Image

from experiments.models import Dataset

EXAMPLES_PER_CLASS = 6
MAX_CLASSES_SHOWN = 20  # a 1,000-class dataset shows its first classes, and says so
THUMBNAIL_SIDE = 48  # px: an 8×8 digit is scaled up (pixels kept sharp), a photo scaled down
GAP = 4
FORMAT_VERSION = 1  # part of the cache name: change it when the drawing changes
_MODES = {1: "L", 3: "RGB", 4: "RGBA"}


def shown_classes(dataset: Dataset) -> list[dict]:
    """The classes whose examples the page shows: index (the label in y), name and count."""
    return [{"index": i, "name": name, "count": dataset.class_counts.get(name, 0)}
            for i, name in enumerate(dataset.classes[:MAX_CLASSES_SHOWN])]


def strip_width(count: int = EXAMPLES_PER_CLASS) -> int:
    return count * THUMBNAIL_SIDE + (count - 1) * GAP


def _cache_dir(dataset: Dataset) -> Path:
    return Path(settings.VAR_DIR) / "dataset-examples" / f"{dataset.arrays.sha256}-v{FORMAT_VERSION}"


def class_examples_png(dataset: Dataset, class_index: int, *, copy_arrays: Callable[[Path], Path]) -> bytes:
    """The PNG strip of one class's examples (drawn with every other class's on first use).
    `copy_arrays(path)` writes the dataset's stored .npz there: a read, so the caller's to make."""
    folder = _cache_dir(dataset)
    path = folder / f"{class_index}.png"
    if not path.exists():
        _draw_all(dataset, folder, copy_arrays)
    return path.read_bytes()


def _draw_all(dataset: Dataset, folder: Path, copy_arrays: Callable[[Path], Path]) -> None:
    classes = len(shown_classes(dataset))
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent) as tmp:
        arrays = copy_arrays(Path(tmp) / "splits.npz")
        examples = _examples(arrays, classes)
        drawn = Path(tmp) / "drawn"
        drawn.mkdir()
        for index in range(classes):
            (drawn / f"{index}.png").write_bytes(_strip(examples.get(index, [])))
        try:
            os.replace(drawn, folder)  # atomic: a reader sees every strip or none
        except OSError:
            if not folder.exists():  # not another request that drew the same strips meanwhile
                raise


def _read_header(stream) -> tuple[tuple[int, ...], np.dtype]:
    version = np.lib.format.read_magic(stream)
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran_order, dtype = read(stream)
    if fortran_order:  # experiments/datasets/arrays.write_npz never writes one
        raise ValueError("the stored images are in Fortran order")
    return shape, dtype


def _examples(npz_path: Path, classes: int) -> dict[int, list[np.ndarray]]:
    """Up to EXAMPLES_PER_CLASS training images of each of the first `classes` labels, in row order."""
    with zipfile.ZipFile(npz_path) as archive:
        with archive.open("y_train.npy") as member:
            labels = np.lib.format.read_array(member, allow_pickle=False)
        wanted: dict[int, list[int]] = {}
        for row, label in enumerate(labels.tolist()):
            if 0 <= label < classes and len(wanted.setdefault(label, [])) < EXAMPLES_PER_CLASS:
                wanted[label].append(row)
        rows = {row: label for label, picked in wanted.items() for row in picked}
        found: dict[int, list[np.ndarray]] = {}
        if not rows:
            return found
        last = max(rows)
        with archive.open("x_train.npy") as member:
            shape, dtype = _read_header(member)
            row_bytes = int(np.prod(shape[1:])) * dtype.itemsize
            for row in range(last + 1):
                data = member.read(row_bytes)
                if row in rows:
                    image = np.frombuffer(data, dtype=dtype).reshape(shape[1:])
                    found.setdefault(rows[row], []).append(image)
    return found


def _as_uint8(image: np.ndarray) -> np.ndarray:
    """Images are stored as uint8 pixels; anything else is stretched to 0-255 for display only."""
    if image.dtype == np.uint8:
        return image
    values = image.astype(np.float64)
    low, high = float(np.nanmin(values)), float(np.nanmax(values))
    scaled = (values - low) / (high - low) * 255 if high > low else np.zeros_like(values)
    return np.nan_to_num(scaled).round().astype(np.uint8)


def _thumbnail(image: np.ndarray) -> Image.Image:
    pixels = _as_uint8(image if image.ndim == 3 else image[..., np.newaxis])
    channels = pixels.shape[-1]
    picture = Image.fromarray(pixels[..., 0] if channels == 1 else pixels, _MODES.get(channels, "L"))
    height, width = pixels.shape[:2]
    scale = THUMBNAIL_SIDE / max(height, width)
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    # Nearest neighbour keeps a tiny image's pixels square; a larger one is averaged down.
    return picture.resize(size, Image.Resampling.NEAREST if scale >= 1 else Image.Resampling.BOX)


def _strip(images: list[np.ndarray]) -> bytes:
    count = max(1, len(images))
    strip = Image.new("RGBA", (strip_width(count), THUMBNAIL_SIDE), (255, 255, 255, 0))
    for i, image in enumerate(images):
        thumb = _thumbnail(image).convert("RGBA")
        left = i * (THUMBNAIL_SIDE + GAP) + (THUMBNAIL_SIDE - thumb.width) // 2
        strip.paste(thumb, (left, (THUMBNAIL_SIDE - thumb.height) // 2))
    buffer = io.BytesIO()
    strip.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()
