"""Datasets: parse and validate, split once with a seed, store the splits as one artifact, never holding an
upload whole in memory."""

import tempfile
from dataclasses import dataclass
from typing import BinaryIO

from django.conf import settings
from django.db import IntegrityError, transaction

from experiments.datasets.arrays import write_npz
from experiments.datasets.bundled import load_bundled
from experiments.datasets.core import (
    DatasetError,
    DatasetLimits,
    ParsedDataset,
    binary_file,
    check_upload_size,
    class_warnings,
)
from experiments.datasets.image_reader import parse_image_zip
from experiments.datasets.parsing import parse_npz
from experiments.datasets.sequence_reader import parse_time_series_csv
from experiments.datasets.splits import split_indices
from experiments.datasets.tabular_reader import parse_csv
from experiments.datasets.text_reader import parse_text_csv
from experiments.models import Artifact, Dataset, Team
from experiments.services.artifacts import artifact_create, artifact_files_removed_on_error

__all__ = ["DatasetError", "UploadOptions", "dataset_create_bundled", "dataset_create_upload"]


def dataset_limits() -> DatasetLimits:
    return DatasetLimits(max_bytes=settings.MAX_DATASET_MB * 1024 * 1024, max_rows=settings.MAX_DATASET_ROWS,
                         max_classes=settings.MAX_CLASSES)


def _splits_file(parsed: ParsedDataset, splits) -> BinaryIO:
    train, val, test = splits
    spool = tempfile.TemporaryFile(prefix="tuneboard-splits-")
    write_npz(spool, {
        "x_train": (parsed.x, train), "y_train": (parsed.y, train),
        "x_val": (parsed.x, val), "y_val": (parsed.y, val),
        "x_test": (parsed.x, test), "y_test": (parsed.y, test),
        "train_index": (train, None), "val_index": (val, None), "test_index": (test, None),
    })
    spool.seek(0)
    return spool


def _save(*, team: Team, user, name: str, parsed: ParsedDataset, val_fraction: float,
          test_fraction: float, seed: int, upload: tuple[str, BinaryIO] | None, **fields) -> Dataset:
    name = name.strip()
    if not name:
        raise DatasetError("Give the dataset a name.")
    if Dataset.objects.filter(team=team, name=name).exists():
        raise DatasetError(f"Your team already has a dataset named {name!r}; choose another name.")
    splits = split_indices(parsed, val_fraction=val_fraction, test_fraction=test_fraction, seed=seed)
    details = dict(parsed.details)
    if warnings := class_warnings(parsed):
        details["warnings"] = warnings
    try:
        with _splits_file(parsed, splits) as arrays_file, artifact_files_removed_on_error() as created, \
                transaction.atomic():
            upload_artifact = None
            if upload is not None:
                filename, data = upload
                upload_artifact = created(artifact_create(
                    team=team, kind=Artifact.Kind.DATASET_UPLOAD, filename=filename, fileobj=data
                ))
            arrays = created(artifact_create(
                team=team, kind=Artifact.Kind.DATASET_ARRAYS, filename=f"{name}-splits.npz", fileobj=arrays_file,
            ))
            return Dataset.objects.create(
                team=team, name=name, created_by=user, task=parsed.task, kind=parsed.kind, details=details,
                n_rows=parsed.n_rows, n_features=parsed.n_features, input_shape=parsed.input_shape,
                feature_names=parsed.feature_names, classes=parsed.classes,
                class_counts=parsed.class_counts, preview=parsed.preview(10),
                val_fraction=val_fraction, test_fraction=test_fraction, split_seed=seed,
                split_sizes={"train": len(splits[0]), "validation": len(splits[1]), "test": len(splits[2])},
                upload=upload_artifact, arrays=arrays, **fields,
            )
    except IntegrityError:
        raise DatasetError(f"Your team already has a dataset named {name!r}; choose another name.") from None


def dataset_create_bundled(*, team: Team, user, bundled_name: str, name: str = "",
                           val_fraction: float = 0.15, test_fraction: float = 0.15, seed: int = 0) -> Dataset:
    parsed = load_bundled(bundled_name)
    return _save(team=team, user=user, name=name or bundled_name, parsed=parsed,
                 val_fraction=val_fraction, test_fraction=test_fraction, seed=seed, upload=None,
                 source=Dataset.Source.BUNDLED, bundled_name=bundled_name)


@dataclass(frozen=True)
class UploadOptions:
    """What the upload form asks beside the file; each applies to some kinds of file only."""

    kind: str = "auto"  # auto | tabular | image | text | sequence
    target_column: str = ""  # CSV: the column to predict
    text_column: str = ""  # CSV of texts
    window: int | None = None  # CSV time series: time steps per sample
    horizon: int = 1  # ... and how far ahead of the window the target is
    image_size: tuple[int, int] | None = None  # images: (height, width); None = the most common
    color_mode: str = "auto"
    task: str = "auto"


def _parse_upload(filename: str, data: BinaryIO, options: UploadOptions,
                  limits: DatasetLimits) -> tuple[ParsedDataset, str]:
    lower, kind = filename.lower(), options.kind
    target = options.target_column.strip()
    if lower.endswith(".zip"):
        if kind not in ("auto", "image"):
            raise DatasetError(f"A .zip upload holds images (one folder per class), not {kind} data.")
        return parse_image_zip(data, image_size=options.image_size, color_mode=options.color_mode,
                               task=options.task, limits=limits), "zip"
    if lower.endswith(".npz"):
        return parse_npz(data, task=options.task, kind=kind, image_size=options.image_size, limits=limits), "npz"
    if not lower.endswith(".csv"):
        raise DatasetError("Upload a .csv file (with a header row), a .npz file with arrays x and y, "
                           "or a .zip of images in one folder per class.")
    if kind == "image":
        raise DatasetError("Images come as a .zip of one folder per class or as a .npz file, not as a CSV.")
    if not target:
        raise DatasetError("Name the target column of the CSV (the column to predict).")
    text_column = options.text_column.strip()
    if kind == "text" or text_column:
        if not text_column:
            raise DatasetError("Name the text column of the CSV (the column holding the texts).")
        return parse_text_csv(data, text_column=text_column, target_column=target, task=options.task,
                              limits=limits), "csv"
    if kind == "sequence" or options.window is not None:
        if options.window is None:
            raise DatasetError("A CSV time series needs a window length: how many time steps each sample sees.")
        task = "regression" if options.task == "auto" else options.task
        return parse_time_series_csv(data, target_column=target, window=options.window, horizon=options.horizon,
                                     task=task, limits=limits), "csv"
    return parse_csv(data, target_column=target, task=options.task, limits=limits), "csv"


def dataset_create_upload(*, team: Team, user, name: str, filename: str, data: bytes | BinaryIO, size: int,
                          limit_mb: int, options: UploadOptions | None = None, target_column: str = "",
                          task: str = "auto", val_fraction: float = 0.15, test_fraction: float = 0.15,
                          seed: int = 0) -> Dataset:
    """data: the uploaded bytes or a binary file (Django's upload, spooled to disk when large);
    it is never read whole into memory, and not read at all when size is over the limit."""
    check_upload_size(size, limit_mb)
    options = options or UploadOptions(target_column=target_column, task=task)
    file = binary_file(data)
    parsed, file_format = _parse_upload(filename, file, options, dataset_limits())
    return _save(team=team, user=user, name=name, parsed=parsed, val_fraction=val_fraction,
                 test_fraction=test_fraction, seed=seed, upload=(filename, file),
                 source=Dataset.Source.UPLOAD, file_format=file_format,
                 target_column=options.target_column.strip() if file_format == "csv" else "")
