"""Images as uint8 arrays from a zip of class folders or an .npz, checked before anything is decompressed and
decoded one at a time, since an upload is untrusted."""

from __future__ import annotations

import io
import re
import zipfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np
from PIL import Image

from experiments.datasets.arrays import ArrayWriter, blocks, converted
from experiments.datasets.core import (
    DEFAULT_LIMITS,
    GB,
    MB,
    DatasetError,
    DatasetLimits,
    ParsedDataset,
    binary_file,
    check_bytes,
    check_task,
)

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".gif")
COLOR_MODES = ("auto", "grayscale", "rgb", "rgba")
_CHANNELS = {"grayscale": 1, "rgb": 3, "rgba": 4}
_PIL_MODES = {"grayscale": "L", "rgb": "RGB", "rgba": "RGBA"}
_COLOR_MODE_OF_CHANNELS = {1: "grayscale", 3: "rgb", 4: "rgba"}
_MAX_DECLARED_BYTES = 1 * GB  # everything in the zip, unpacked
# A member that unpacks to more than this many times its packed size is a zip bomb; real images
# are already compressed and barely shrink in a zip (uncompressed BMPs of flat drawings do, to
# a few percent, hence the generous ratio and a floor below which nothing is refused).
_MAX_MEMBER_RATIO = 1000
_RATIO_FLOOR_BYTES = 10 * MB
_MAX_IMAGES = 200_000
_MAX_ARRAY_BYTES = 2 * GB
_MAX_AUTO_SIDE = 256  # the automatic size keeps models small enough to tune on a CPU
_MAX_SIDE = 2048
# One decoded image above this is refused before decoding: a tiny PNG can declare 50,000 ×
# 50,000 pixels.
_MAX_SOURCE_PIXELS = 50_000_000
_MAX_SKIPPED_LISTED = 50
_EXAMPLE = "for example cats/001.jpg and dogs/001.jpg"
_GREY_MODES = frozenset({"1", "L", "LA", "I", "I;16", "I;16B", "I;16L", "I;16N", "F"})


@dataclass
class _Member:
    info: zipfile.ZipInfo
    class_name: str


# --- zip of class folders -----------------------------------------------------------------


def parse_image_zip(
    data: bytes | BinaryIO,
    *,
    image_size: tuple[int, int] | None = None,
    color_mode: str = "auto",
    task: str = "auto",
    limits: DatasetLimits = DEFAULT_LIMITS,
    labelled: bool = True,
) -> ParsedDataset:
    """Images in one folder per class, zipped (the folder is the class); unlabelled, images anywhere at the trained
    size."""
    check_task(task)
    if labelled and task == "regression":
        raise DatasetError(
            "A zip of class folders can only be used for classification: each image's label is "
            "the name of its folder. To predict a number from images, upload an .npz file with "
            "x (the images) and y (the numbers) instead."
        )
    if color_mode not in COLOR_MODES:
        raise DatasetError(f"Unknown colour mode {color_mode!r}; use one of: {', '.join(COLOR_MODES)}.")
    size = _checked_size(image_size)
    file = binary_file(data)
    if not file.read(1):
        raise DatasetError("The file is empty.")
    try:
        archive = zipfile.ZipFile(file)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError):
        raise DatasetError(
            "The file is not a valid .zip archive. Put the images in one folder per class "
            f"({_EXAMPLE}), zip those folders and upload the .zip file."
        ) from None
    with archive:
        members, skipped = _image_members(archive, labelled=labelled)
        classes = sorted({member.class_name for member in members}) if labelled else []
        if len(classes) == 1:
            raise DatasetError(
                f"The zip has only one class folder, {classes[0]!r}; classification needs at "
                f"least two. Put each class's images in a folder of its own ({_EXAMPLE}) and zip "
                "those folders together."
            )
        shapes, colourless = _survey(archive, members)
        if not labelled:
            _check_sizes(members, shapes, size)
        height, width = size or _auto_size(shapes)
        if color_mode == "auto":
            color_mode = "grayscale" if colourless else "rgb"
        channels = _CHANNELS[color_mode]
        _check_array_bytes(len(members), height, width, channels)
        check_bytes(len(members) * height * width * channels, limits, "The images as bytes")

        resized = 0
        with ArrayWriter(np.uint8, (height, width, channels)) as writer:
            for member in members:
                with _reading(member.info.filename):
                    image = Image.open(io.BytesIO(archive.read(member.info)))
                    image.load()
                    resized += image.size != (width, height)
                    writer.write(_pixels(image, color_mode, height, width)[np.newaxis])
            x = writer.finish()

    index = {name: i for i, name in enumerate(classes)}
    y = np.array([index[member.class_name] for member in members] if labelled else [], dtype=np.int64)
    details = {
        "source_format": "zip",
        "image_size": [height, width],
        "color_mode": color_mode,
        "files_used": len(members),
        "resized": resized,
        "skipped": skipped[:_MAX_SKIPPED_LISTED],
        "skipped_count": len(skipped),
    }
    if not labelled:
        details["files"] = [member.info.filename for member in members]
    return ParsedDataset(x, y, [], "classification", classes, "label", kind="image", details=details)


def _checked_size(image_size: tuple[int, int] | None) -> tuple[int, int] | None:
    if image_size is None:
        return None
    try:
        height, width = (int(side) for side in image_size)
        valid = all(int(side) == side for side in image_size)
    except (TypeError, ValueError):
        valid = False
    if not valid or not (1 <= height <= _MAX_SIDE and 1 <= width <= _MAX_SIDE):
        raise DatasetError(
            f"The image size must be two whole numbers (height, width) from 1 to {_MAX_SIDE}, "
            f"got {image_size!r}."
        )
    return height, width


def _image_members(archive: zipfile.ZipFile, *, labelled: bool = True) -> tuple[list[_Member], list[dict[str, str]]]:
    """The images to read and the files skipped with reasons, from the zip's directory alone, its safety checks first
    so nothing else happens to a hostile archive."""
    infos = archive.infolist()
    for info in infos:
        if _unsafe(info.filename):
            raise DatasetError(
                f"The zip contains an entry with an unsafe path, {info.filename!r}: paths must "
                "not be absolute or contain '..'. Zip the class folders again from their parent "
                "folder and upload that zip."
            )
        if info.flag_bits & 0x1:
            raise DatasetError(
                f"The zip is password-protected ({info.filename!r} is encrypted). "
                "Upload a zip without a password."
            )
        if info.file_size > _RATIO_FLOOR_BYTES and info.file_size > _MAX_MEMBER_RATIO * max(info.compress_size, 1):
            raise DatasetError(
                f"The zip entry {info.filename!r} would expand from {info.compress_size:,} bytes to "
                f"{info.file_size / MB:,.0f} MB, over {_MAX_MEMBER_RATIO:,} times its packed size: "
                "this looks like a zip bomb, so nothing was unpacked. Remove that entry and upload "
                "the zip again."
            )
    declared = sum(info.file_size for info in infos)
    if declared > _MAX_DECLARED_BYTES:
        raise DatasetError(
            f"The zip would expand to {declared / GB:.1f} GB; the limit is "
            f"{_MAX_DECLARED_BYTES // GB} GB. Upload fewer or smaller images."
        )
    files = [info for info in infos if not info.is_dir()]
    if not files:
        raise DatasetError(
            f"The zip archive is empty. Put the images in one folder per class ({_EXAMPLE}), "
            "zip those folders and upload the .zip file."
        )

    skipped: list[dict[str, str]] = []
    candidates: list[tuple[zipfile.ZipInfo, list[str]]] = []
    for info in files:
        parts = info.filename.replace("\\", "/").split("/")
        if parts[0] == "__MACOSX":
            skipped.append({"file": info.filename, "reason": "macOS metadata, not an image"})
        elif any(part.startswith(".") for part in parts):
            skipped.append({"file": info.filename, "reason": "hidden file"})
        elif not parts[-1].lower().endswith(IMAGE_EXTENSIONS):
            skipped.append({"file": info.filename, "reason": f"not an image ({_extensions()} are read)"})
        else:
            candidates.append((info, parts))
    if len(candidates) > _MAX_IMAGES:
        raise DatasetError(
            f"The zip holds {len(candidates):,} images; the limit is {_MAX_IMAGES:,}. "
            "Upload a sample of them."
        )

    in_folders = [parts for _, parts in candidates if len(parts) >= 2]
    wrapped = (
        bool(in_folders)
        and all(len(parts) >= 3 for parts in in_folders)
        and len({parts[0] for parts in in_folders}) == 1
    )
    members: list[_Member] = []
    for info, parts in candidates:
        if not labelled:
            members.append(_Member(info, ""))
        elif len(parts) < 2:
            skipped.append({"file": info.filename, "reason": "not inside a class folder"})
        else:
            members.append(_Member(info, parts[1] if wrapped else parts[0]))
    if not members:
        if candidates:
            raise DatasetError(
                "The images are at the top of the zip, not in class folders. Put them in one "
                f"folder per class ({_EXAMPLE}), zip those folders and upload the .zip file."
            )
        example = f" It holds {len(skipped)} other files, such as {skipped[0]['file']!r}." if skipped else ""
        raise DatasetError(
            f"The zip holds no images: only {_extensions()} files are read, in one folder per "
            f"class ({_EXAMPLE}).{example}"
        )
    members.sort(key=lambda member: (member.class_name, member.info.filename))
    return members, skipped


def _unsafe(name: str) -> bool:
    path = name.replace("\\", "/")
    return path.startswith("/") or bool(re.match(r"[A-Za-z]:", path)) or ".." in path.split("/")


def _extensions() -> str:
    return ", ".join(IMAGE_EXTENSIONS[:-1]) + f" and {IMAGE_EXTENSIONS[-1]}"


def _survey(archive: zipfile.ZipFile, members: list[_Member]) -> tuple[list[tuple[int, int]], bool]:
    """Each image's (height, width), read from its header only, and whether none has colour."""
    shapes: list[tuple[int, int]] = []
    colourless = True
    for member in members:
        name = member.info.filename
        with _reading(name), archive.open(member.info) as stream, Image.open(stream) as image:
            width, height = image.size
            if width * height > _MAX_SOURCE_PIXELS:
                raise _too_many_pixels(name, width, height)
            shapes.append((height, width))
            if colourless and image.mode not in _GREY_MODES:
                colourless = image.mode in ("P", "PA") and _grey_palette_image(image)
    return shapes, colourless


def _check_sizes(members: list[_Member], shapes: list[tuple[int, int]], size: tuple[int, int] | None) -> None:
    """Inputs to predict must be the model's size: refuses the first image of another size."""
    if size is None:
        raise DatasetError("Images to predict need the model's image size.")
    for member, shape in zip(members, shapes, strict=True):
        if shape != size:
            raise DatasetError(
                f"The image {member.info.filename!r} is {shape[0]}×{shape[1]} pixels (height × width); "
                f"the model takes {size[0]}×{size[1]} images. Resize the images to {size[0]}×{size[1]} "
                "and upload them again."
            )


def _grey_palette_image(image: Image.Image) -> bool:
    # A palette image is grey when the colours it shows are; unused palette entries don't count.
    rgb = np.asarray(image.convert("RGB"))
    return bool((rgb[..., 0] == rgb[..., 1]).all() and (rgb[..., 1] == rgb[..., 2]).all())


def _auto_size(shapes: list[tuple[int, int]]) -> tuple[int, int]:
    """The most common (height, width), the larger side scaled down to _MAX_AUTO_SIDE."""
    counts = Counter(shapes)  # ties go to the size met first, in class and file order
    height, width = max(counts, key=lambda shape: counts[shape])
    scale = _MAX_AUTO_SIDE / max(height, width)
    if scale < 1:
        height, width = max(1, round(height * scale)), max(1, round(width * scale))
    return height, width


def _check_array_bytes(n: int, height: int, width: int, channels: int) -> None:
    nbytes = n * height * width * channels
    if nbytes > _MAX_ARRAY_BYTES:
        raise DatasetError(
            f"The {n:,} images of {height}×{width}×{channels} would take {nbytes / GB:.1f} GB as "
            f"one array; the limit is {_MAX_ARRAY_BYTES // GB} GB. Choose a smaller image size "
            "or grayscale, or upload fewer images."
        )


@contextmanager
def _reading(name: str) -> Iterator[None]:
    """Turns any failure to read or decode the named zip entry into a DatasetError naming it."""
    try:
        yield
    except DatasetError:
        raise
    except Image.DecompressionBombError:
        raise _too_many_pixels(name, 0, 0) from None
    except Exception:
        # Pillow raises UnidentifiedImageError, OSError, SyntaxError, ValueError…; zipfile
        # BadZipFile for a bad checksum and NotImplementedError for an unknown compression.
        raise DatasetError(
            f"The file {name!r} could not be read as an image: it is damaged or not really "
            f"a {name.rsplit('.', 1)[-1].upper()} image. Remove or replace it and upload the "
            "zip again."
        ) from None


def _too_many_pixels(name: str, width: int, height: int) -> DatasetError:
    size = f"is {width:,}×{height:,} pixels" if width else "has too many pixels"
    return DatasetError(
        f"The image {name!r} {size}; images may have at most {_MAX_SOURCE_PIXELS:,} pixels. "
        "Shrink it and upload the zip again."
    )


def _pixels(image: Image.Image, color_mode: str, height: int, width: int) -> np.ndarray:
    """The image as uint8 (height, width, channels) in color_mode, resized if needed."""
    if image.mode.startswith("I") or image.mode == "F":
        # 16- or 32-bit grey: Pillow's conversion to 8 bits clips at 255, which would turn
        # most of a 16-bit image white; keep its top 8 bits instead.
        grey = np.asarray(image, dtype=np.float64)
        scale = 257.0 if grey.max(initial=0) > 255 else 1.0
        image = Image.fromarray(np.clip(np.round(grey / scale), 0, 255).astype(np.uint8))
    if image.mode == "P" and "transparency" in image.info:
        image = image.convert("RGBA")  # Pillow asks for this route for transparent palettes
    target = _PIL_MODES[color_mode]
    if image.mode != target:
        try:
            image = image.convert(target)
        except ValueError:  # no direct conversion (e.g. CMYK to L)
            image = image.convert("RGBA").convert(target)
    if image.size != (width, height):
        image = image.resize((width, height), Image.Resampling.BILINEAR)
    pixels = np.asarray(image, dtype=np.uint8)
    return pixels.reshape(height, width, _CHANNELS[color_mode])


# --- image arrays from an .npz ------------------------------------------------------------


def image_array(
    x: np.ndarray, *, image_size: tuple[int, int] | None = None, limits: DatasetLimits = DEFAULT_LIMITS
) -> tuple[np.ndarray, dict]:
    """Numeric x as uint8 (n, h, w, channels) and the page's details, converted and resized a block of images at a time
    into a temporary file."""
    size = _checked_size(image_size)
    if x.ndim == 3:
        x = x[..., np.newaxis]  # one grey channel
    if x.shape[-1] not in _COLOR_MODE_OF_CHANNELS:
        shape = "×".join(str(d) for d in x.shape)
        hint = ""
        if x.shape[1] in _COLOR_MODE_OF_CHANNELS:
            hint = " It looks channels-first: save numpy.moveaxis(x, 1, -1) instead."
        raise DatasetError(
            f"Images need 1 (grey), 3 (RGB) or 4 (RGBA) channels in the last axis, but x is "
            f"{shape}.{hint}"
        )
    n, height, width, channels = (int(d) for d in x.shape)
    if n == 0 or height == 0 or width == 0:
        raise DatasetError("The images are empty: x has no pixels.")
    details: dict = {
        "source_format": "npz",
        "image_size": [height, width],
        "color_mode": _COLOR_MODE_OF_CHANNELS[channels],
    }
    resize = size is not None and size != (height, width)
    out_height, out_width = size if resize else (height, width)
    _check_array_bytes(n, out_height, out_width, channels)
    check_bytes(n * out_height * out_width * channels, limits, "The images as bytes")
    scaled = None
    if x.dtype != np.uint8:
        scaled = _scaled_from_unit_range(x)
        details["converted_from"] = str(x.dtype)
        details["conversion"] = "scaled from 0..1 to 0..255 and rounded" if scaled else "clipped to 0..255 and rounded"

    def to_bytes(block: np.ndarray) -> np.ndarray:
        if scaled is not None:
            pixels = block.astype(np.float64)
            block = np.clip(np.round(pixels * 255 if scaled else pixels), 0, 255)
        block = block.astype(np.uint8)
        return np.stack([_resized(image, out_height, out_width) for image in block]) if resize else block

    images = converted(x, np.uint8, transform=to_bytes if scaled is not None or resize else None)
    if resize:
        details["resized_from"] = [height, width]
        details["image_size"] = [out_height, out_width]
    return images, details


def _scaled_from_unit_range(x: np.ndarray) -> bool:
    """Whether non-uint8 pixels are 0..1 intensities (floats up to 1.0, or booleans) rather than
    0..255 levels; refuses NaN and infinity. One pass over x, a block at a time."""
    non_finite, largest = 0, -np.inf
    for block in blocks(x):
        if block.dtype.kind == "f":
            finite = np.isfinite(block)
            non_finite += int(block.size - np.count_nonzero(finite))
            if finite.any():
                largest = max(largest, float(block[finite].max()))
    if non_finite:
        raise DatasetError(
            f"x has {non_finite:,} missing (NaN) or infinite pixel value{'s' if non_finite > 1 else ''}. "
            "Fill them in or remove those images."
        )
    return x.dtype.kind == "b" or (x.dtype.kind == "f" and largest <= 1.0)


def _resized(image: np.ndarray, height: int, width: int) -> np.ndarray:
    channels = image.shape[-1]
    picture = Image.fromarray(image if channels > 1 else image[..., 0])  # L, RGB or RGBA
    return np.asarray(picture.resize((width, height), Image.Resampling.BILINEAR)).reshape(height, width, channels)
