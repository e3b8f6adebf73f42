"""Image datasets: a zip of class folders or image arrays in an .npz become uint8 (n, h, w, c),
and a hostile or broken zip is refused, before anything is unpacked where that matters."""

import bz2
import io
import json
import struct
import time
import zipfile

import numpy as np
import pytest
from PIL import Image

from experiments.datasets import image_reader
from experiments.datasets.image_reader import parse_image_zip
from experiments.datasets.parsing import parse_npz
from tests.unit.parsing_helpers import npz_bytes, rejects


def image_bytes(size=(8, 6), mode="L", color=0, fmt="PNG") -> bytes:
    """An image of width × height = size filled with color."""
    buffer = io.BytesIO()
    Image.new(mode, size, color).save(buffer, format=fmt)
    return buffer.getvalue()


def zip_bytes(files: dict[str, bytes], compression=zipfile.ZIP_STORED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()




def two_classes(**extra: bytes) -> bytes:
    return zip_bytes(
        {
            "dogs/1.png": image_bytes(color=200),
            "cats/1.png": image_bytes(color=10),
            "cats/2.png": image_bytes(color=20),
            "cats/3.png": image_bytes(color=30),
            "dogs/2.png": image_bytes(color=210),
            **extra,
        }
    )


@pytest.fixture
def no_unpacking(monkeypatch):
    """Any attempt to decompress a member fails the test: refusals must come from the directory."""

    writable_open = zipfile.ZipFile.open

    def open_for_writing_only(self, name, mode="r", *args, **kwargs):
        if mode == "r":  # ZipFile.read goes through here too
            raise AssertionError(f"the zip member {name} was unpacked")
        return writable_open(self, name, mode, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "open", open_for_writing_only)


def with_declared_sizes(data: bytes, sizes: list[int]) -> bytes:
    """The zip with each central-directory entry claiming the given uncompressed size."""
    patched = bytearray(data)
    at = 0
    for size in sizes:
        at = patched.index(b"PK\x01\x02", at)
        patched[at + 24 : at + 28] = struct.pack("<I", size)  # uncompressed size field
        at += 4
    return bytes(patched)


# --- a zip of class folders: what is read -------------------------------------------------


def test_each_folder_is_a_class_in_sorted_order_and_images_keep_their_pixels():
    parsed = parse_image_zip(two_classes())
    assert parsed.kind == "image" and parsed.task == "classification"
    assert parsed.classes == ["cats", "dogs"]
    assert parsed.class_counts == {"cats": 3, "dogs": 2}
    assert parsed.x.dtype == np.uint8 and parsed.x.shape == (5, 6, 8, 1)
    assert parsed.y.dtype == np.int64 and parsed.y.tolist() == [0, 0, 0, 1, 1]
    assert [int(image.mean()) for image in parsed.x] == [10, 20, 30, 200, 210]
    assert parsed.feature_names == [] and parsed.input_shape == [6, 8, 1] and parsed.n_features == 48
    assert parsed.preview(2) == [{"image": "6×8×1", "label": "cats"}, {"image": "6×8×1", "label": "cats"}]
    assert parsed.details == {
        "source_format": "zip",
        "image_size": [6, 8],
        "color_mode": "grayscale",
        "files_used": 5,
        "resized": 0,
        "skipped": [],
        "skipped_count": 0,
    }


def test_non_images_and_files_outside_class_folders_are_skipped_and_reported():
    data = two_classes(
        **{
            "README.txt": b"my pets",
            ".DS_Store": b"\x00\x01",
            "__MACOSX/cats/._1.png": b"\x00\x05\x16\x07",
            "cats/notes.txt": b"fluffy",
            "loose.png": image_bytes(),
        }
    )
    parsed = parse_image_zip(data)
    assert parsed.n_rows == 5
    reasons = {entry["file"]: entry["reason"] for entry in parsed.details["skipped"]}
    assert reasons["README.txt"].startswith("not an image")
    assert reasons["cats/notes.txt"].startswith("not an image")
    assert reasons[".DS_Store"] == "hidden file"
    assert reasons["__MACOSX/cats/._1.png"] == "macOS metadata, not an image"
    assert reasons["loose.png"] == "not inside a class folder"
    assert parsed.details["skipped_count"] == 5
    json.dumps(parsed.details)  # stored in a JSON field


def test_the_skipped_list_is_capped_but_the_count_is_not():
    junk = {f"cats/note{i}.txt": b"x" for i in range(60)}
    parsed = parse_image_zip(two_classes(**junk))
    assert len(parsed.details["skipped"]) == 50 and parsed.details["skipped_count"] == 60


def test_a_single_wrapper_folder_around_the_class_folders_is_accepted():
    data = zip_bytes(
        {
            "pets/cats/1.png": image_bytes(),
            "pets/dogs/1.png": image_bytes(),
            "pets/dogs/2.png": image_bytes(),
            "README.md": b"zipped from the parent folder",
        }
    )
    parsed = parse_image_zip(data)
    assert parsed.classes == ["cats", "dogs"] and parsed.class_counts == {"cats": 1, "dogs": 2}


def test_images_in_subfolders_of_a_class_folder_belong_to_that_class():
    data = zip_bytes(
        {"cats/kittens/1.png": image_bytes(), "cats/2.png": image_bytes(), "dogs/1.png": image_bytes()}
    )
    assert parse_image_zip(data).class_counts == {"cats": 2, "dogs": 1}


def test_jpeg_bmp_and_gif_are_read_as_well_as_png():
    data = zip_bytes(
        {
            "a/1.jpg": image_bytes(mode="RGB", color=(90, 90, 90), fmt="JPEG"),
            "a/2.JPEG": image_bytes(mode="RGB", color=(90, 90, 90), fmt="JPEG"),
            "b/1.bmp": image_bytes(color=90, fmt="BMP"),
            "b/2.gif": image_bytes(color=90, fmt="GIF"),
        }
    )
    parsed = parse_image_zip(data)
    assert parsed.n_rows == 4 and parsed.details["color_mode"] == "rgb"
    assert np.abs(parsed.x.astype(int) - 90).max() <= 2  # JPEG is lossy


# --- size and colour ----------------------------------------------------------------------


def test_the_most_common_size_is_chosen_and_other_images_are_resized():
    data = zip_bytes(
        {
            "a/1.png": image_bytes(size=(10, 12)),
            "a/2.png": image_bytes(size=(10, 12)),
            "b/1.png": image_bytes(size=(10, 12)),
            "b/2.png": image_bytes(size=(20, 20), color=200),
        }
    )
    parsed = parse_image_zip(data)
    assert parsed.x.shape == (4, 12, 10, 1)  # (height, width) from Pillow's (width, height)
    assert parsed.details["image_size"] == [12, 10] and parsed.details["resized"] == 1
    assert (parsed.x[3] == 200).all()


def test_the_automatic_size_is_capped_at_256_keeping_the_aspect_ratio():
    data = zip_bytes({"a/1.png": image_bytes(size=(600, 300)), "b/1.png": image_bytes(size=(600, 300))})
    assert parse_image_zip(data).details["image_size"] == [128, 256]


def test_an_explicit_image_size_resizes_every_image():
    parsed = parse_image_zip(two_classes(), image_size=(4, 5))
    assert parsed.x.shape == (5, 4, 5, 1) and parsed.details["image_size"] == [4, 5]
    assert parsed.details["resized"] == 5


def test_auto_colour_is_rgb_when_any_image_has_colour():
    data = two_classes(**{"dogs/3.png": image_bytes(mode="RGB", color=(255, 0, 0))})
    parsed = parse_image_zip(data)
    assert parsed.details["color_mode"] == "rgb" and parsed.x.shape == (6, 6, 8, 3)
    assert parsed.x[0, 0, 0].tolist() == [10, 10, 10]  # grey images are spread over RGB
    assert parsed.x[5, 0, 0].tolist() == [255, 0, 0]


def test_a_palette_image_of_greys_stays_grayscale_but_a_coloured_one_does_not():
    grey = Image.new("P", (8, 6))
    grey.putpalette([v for level in range(256) for v in (level, level, level)])
    buffer = io.BytesIO()
    grey.save(buffer, format="PNG")
    assert parse_image_zip(two_classes(**{"dogs/3.png": buffer.getvalue()})).details["color_mode"] == "grayscale"
    coloured = image_bytes(mode="P", color=0)  # Pillow's default palette starts with black…
    image = Image.open(io.BytesIO(coloured))
    image.putpalette([255, 0, 0] * 256)  # …this one is all red
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    assert parse_image_zip(two_classes(**{"dogs/3.png": buffer.getvalue()})).details["color_mode"] == "rgb"


def test_a_forced_colour_mode_converts_every_image():
    data = two_classes(**{"dogs/3.png": image_bytes(mode="RGB", color=(255, 0, 0))})
    grey = parse_image_zip(data, color_mode="grayscale")
    assert grey.x.shape[-1] == 1 and grey.x[5, 0, 0, 0] == 76  # Pillow's luminance of pure red
    rgba = parse_image_zip(data, color_mode="rgba")
    assert rgba.x.shape[-1] == 4 and rgba.x[5, 0, 0].tolist() == [255, 0, 0, 255]
    assert rgba.details["color_mode"] == "rgba"


def test_sixteen_bit_grey_images_keep_their_contrast():
    deep = Image.fromarray(np.full((6, 8), 65535 // 2, dtype=np.uint16))
    buffer = io.BytesIO()
    deep.save(buffer, format="PNG")
    parsed = parse_image_zip(two_classes(**{"dogs/3.png": buffer.getvalue()}))
    assert parsed.details["color_mode"] == "grayscale" and parsed.x[5, 0, 0, 0] == 127


# --- a zip of class folders: refusals -----------------------------------------------------


def test_it_refuses_regression_for_class_folders():
    rejects(["only be used for classification", ".npz"], parse_image_zip, two_classes(), task="regression")


def test_it_refuses_an_unknown_colour_mode_or_a_bad_size():
    rejects(["Unknown colour mode 'sepia'"], parse_image_zip, two_classes(), color_mode="sepia")
    rejects(["two whole numbers (height, width) from 1 to 2048", "(0, 5)"], parse_image_zip, two_classes(),
            image_size=(0, 5))  # fmt: skip


def test_it_refuses_a_file_that_is_not_a_zip():
    rejects(["The file is empty."], parse_image_zip, b"")
    rejects(["not a valid .zip archive", "one folder per class"], parse_image_zip, b"label,x\ncat,1\n")


def test_it_refuses_an_empty_zip():
    rejects(["The zip archive is empty"], parse_image_zip, zip_bytes({}))


def test_it_refuses_a_zip_without_images_and_says_what_it_found():
    rejects(
        ["holds no images", ".png, .jpg, .jpeg, .bmp and .gif", "'README.txt'"],
        parse_image_zip,
        zip_bytes({"README.txt": b"hi", "data/table.csv": b"a,b\n"}),
    )


def test_it_refuses_images_that_are_not_in_class_folders():
    data = zip_bytes({"1.png": image_bytes(), "2.png": image_bytes()})
    rejects(["at the top of the zip, not in class folders"], parse_image_zip, data)


def test_it_refuses_a_single_class_folder():
    data = zip_bytes({"cats/1.png": image_bytes(), "cats/2.png": image_bytes()})
    rejects(["only one class folder, 'cats'", "at least two"], parse_image_zip, data)


def test_it_refuses_a_file_with_an_image_extension_that_is_not_an_image_and_names_it():
    rejects(
        ["'dogs/broken.png' could not be read as an image", "Remove or replace it"],
        parse_image_zip,
        two_classes(**{"dogs/broken.png": b"this is not a png"}),
    )


def test_it_refuses_a_truncated_image_and_names_it():
    full = image_bytes(size=(64, 64), mode="RGB", color=(1, 2, 3), fmt="JPEG")
    rejects(["'dogs/cut.jpg' could not be read"], parse_image_zip, two_classes(**{"dogs/cut.jpg": full[:200]}))


@pytest.mark.parametrize("name", ["../evil.png", "/etc/cats/1.png", "cats/../../up.png", "C:/cats/1.png"])
def test_it_refuses_a_path_that_escapes_the_archive_and_names_it(name, no_unpacking):
    data = zip_bytes({"cats/1.png": b"x", "dogs/1.png": b"x", name: b"x"})
    rejects(["unsafe path", repr(name), "'..'"], parse_image_zip, data)


def test_it_refuses_a_password_protected_zip():
    data = bytearray(two_classes())
    at = data.index(b"PK\x01\x02")  # the first central-directory entry: dogs/1.png
    data[at + 8] |= 0x1  # its "encrypted" flag, all a reader sees before asking for a password
    rejects(["password-protected", "'dogs/1.png'"], parse_image_zip, bytes(data))


def test_it_refuses_a_zip_bomb_member_without_unpacking_anything(no_unpacking):
    member = bz2.compress(bytes(20 * 1024 * 1024))  # 20 MB of zeros pack into ~50 bytes
    assert len(member) < 1000
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_BZIP2) as archive:
        archive.writestr("cats/1.png", image_bytes())
        archive.writestr("dogs/huge.bmp", bytes(20 * 1024 * 1024))
    started = time.perf_counter()
    rejects(["'dogs/huge.bmp'", "zip bomb", "nothing was unpacked"], parse_image_zip, buffer.getvalue())
    assert time.perf_counter() - started < 1.0


def test_it_refuses_a_zip_that_declares_more_than_a_gigabyte_without_unpacking_it(no_unpacking):
    rng = np.random.default_rng(0)
    members = {f"c{i}/1.bmp": rng.bytes(500_000) for i in range(3)}  # incompressible: a sane ratio
    data = with_declared_sizes(zip_bytes(members), [400 * 1024 * 1024] * 3)
    rejects(["would expand to 1.2 GB", "the limit is 1 GB"], parse_image_zip, data)


def test_it_refuses_too_many_images(monkeypatch, no_unpacking):
    monkeypatch.setattr(image_reader, "_MAX_IMAGES", 4)
    rejects(["holds 5 images; the limit is 4"], parse_image_zip, two_classes())


def test_it_refuses_images_that_would_not_fit_in_one_array(monkeypatch):
    monkeypatch.setattr(image_reader, "_MAX_ARRAY_BYTES", 100)
    rejects(["The 5 images of 6×8×1 would take", "Choose a smaller image size"], parse_image_zip, two_classes())


def test_it_refuses_an_image_with_too_many_pixels_before_decoding_it(monkeypatch):
    monkeypatch.setattr(image_reader, "_MAX_SOURCE_PIXELS", 47)
    rejects(["'cats/1.png' is 8×6 pixels", "at most 47 pixels"], parse_image_zip, two_classes())


# --- image arrays in an .npz --------------------------------------------------------------


def test_a_uint8_npz_of_height_by_width_arrays_is_grayscale_images():
    x = np.arange(6 * 8 * 8, dtype=np.uint8).reshape(6, 8, 8)
    parsed = parse_npz(npz_bytes(x=x, y=np.arange(6) % 2))
    assert parsed.kind == "image" and parsed.x.dtype == np.uint8 and parsed.x.shape == (6, 8, 8, 1)
    assert np.array_equal(parsed.x[..., 0], x)
    assert parsed.details == {"source_format": "npz", "image_size": [8, 8], "color_mode": "grayscale"}
    assert parsed.feature_names == [] and parsed.preview(1) == [{"image": "8×8×1", "y": "0"}]


def test_float_images_in_zero_to_one_are_scaled_to_bytes():
    x = np.zeros((4, 2, 2, 3))
    x[0, 0, 0] = [1.0, 0.5, 0.002]
    parsed = parse_npz(npz_bytes(x=x, y=np.array([0, 1, 0, 1])))
    assert parsed.x.dtype == np.uint8 and parsed.details["color_mode"] == "rgb"
    assert parsed.x[0, 0, 0].tolist() == [255, 128, 1]
    assert parsed.details["converted_from"] == "float64" and "scaled" in parsed.details["conversion"]


def test_other_numeric_images_are_clipped_to_bytes():
    x = np.zeros((4, 2, 2, 4), dtype=np.int16)
    x[0, 0, 0] = [-5, 12, 300, 255]
    parsed = parse_npz(npz_bytes(x=x, y=np.array([0, 1, 0, 1])))
    assert parsed.details["color_mode"] == "rgba" and parsed.x[0, 0, 0].tolist() == [0, 12, 255, 255]
    assert parsed.details["converted_from"] == "int16" and "clipped" in parsed.details["conversion"]


def test_npz_images_are_resized_to_the_requested_size():
    x = np.full((4, 8, 8, 3), 77, dtype=np.uint8)
    parsed = parse_npz(npz_bytes(x=x, y=np.array([0, 1, 0, 1])), image_size=(4, 6))
    assert parsed.x.shape == (4, 4, 6, 3) and (parsed.x == 77).all()
    assert parsed.details["image_size"] == [4, 6] and parsed.details["resized_from"] == [8, 8]


def test_it_refuses_npz_images_with_an_unusable_channel_count():
    y = np.array([0, 1])
    rejects(["1 (grey), 3 (RGB) or 4 (RGBA) channels", "2×8×8×2"], parse_npz, npz_bytes(x=np.zeros((2, 8, 8, 2)), y=y))
    rejects(["channels-first", "moveaxis"], parse_npz, npz_bytes(x=np.zeros((2, 3, 8, 8)), y=y))


def test_it_refuses_non_finite_pixels_with_the_count():
    x = np.zeros((3, 4, 4, 1))
    x[1, 0, 0, 0] = x[2, 1, 1, 0] = np.nan
    rejects(["x has 2 missing (NaN) or infinite pixel values"], parse_npz, npz_bytes(x=x, y=np.array([0, 1, 0])))


def test_a_forced_image_kind_needs_an_image_shape():
    rejects(
        ["Images need x of shape (n, height, width)", "but x is 4×3"],
        parse_npz,
        npz_bytes(x=np.zeros((4, 3)), y=np.array([0, 1, 0, 1])),
        kind="image",
    )
