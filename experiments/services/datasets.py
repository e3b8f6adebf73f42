"""Datasets: parse and validate, split once with a seed, store the splits as one artifact."""

import io

import numpy as np
from django.db import IntegrityError, transaction

from experiments.dataset_parsing import (
    DatasetError,
    ParsedDataset,
    check_upload_size,
    load_bundled,
    parse_csv,
    parse_npz,
    split_indices,
)
from experiments.models import Artifact, Dataset, Team
from experiments.services.artifacts import artifact_create

__all__ = ["DatasetError", "dataset_create_bundled", "dataset_create_upload"]


def _arrays_npz(parsed: ParsedDataset, splits) -> io.BytesIO:
    train, val, test = splits
    buffer = io.BytesIO()
    np.savez_compressed(
        buffer,
        x_train=parsed.x[train], y_train=parsed.y[train],
        x_val=parsed.x[val], y_val=parsed.y[val],
        x_test=parsed.x[test], y_test=parsed.y[test],
        train_index=train, val_index=val, test_index=test,
    )
    buffer.seek(0)
    return buffer


def _save(*, team: Team, user, name: str, parsed: ParsedDataset, val_fraction: float,
          test_fraction: float, seed: int, upload: tuple[str, bytes] | None, **fields) -> Dataset:
    name = name.strip()
    if not name:
        raise DatasetError("Give the dataset a name.")
    if Dataset.objects.filter(team=team, name=name).exists():
        raise DatasetError(f"Your team already has a dataset named {name!r}; choose another name.")
    splits = split_indices(parsed, val_fraction=val_fraction, test_fraction=test_fraction, seed=seed)
    try:
        with transaction.atomic():
            upload_artifact = None
            if upload is not None:
                filename, data = upload
                upload_artifact = artifact_create(
                    team=team, kind=Artifact.Kind.DATASET_UPLOAD, filename=filename, fileobj=io.BytesIO(data)
                )
            arrays = artifact_create(
                team=team, kind=Artifact.Kind.DATASET_ARRAYS, filename=f"{name}-splits.npz",
                fileobj=_arrays_npz(parsed, splits),
            )
            return Dataset.objects.create(
                team=team, name=name, created_by=user, task=parsed.task,
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


def dataset_create_upload(*, team: Team, user, name: str, filename: str, data: bytes, size: int,
                          limit_mb: int, target_column: str = "", task: str = "auto",
                          val_fraction: float = 0.15, test_fraction: float = 0.15, seed: int = 0) -> Dataset:
    check_upload_size(size, limit_mb)
    lower = filename.lower()
    if lower.endswith(".csv"):
        if not target_column.strip():
            raise DatasetError("Name the target column of the CSV (the column to predict).")
        parsed, file_format = parse_csv(data, target_column=target_column.strip(), task=task), "csv"
    elif lower.endswith(".npz"):
        parsed, file_format = parse_npz(data, task=task), "npz"
    else:
        raise DatasetError("Upload a .csv file (with a header row) or a .npz file with arrays x and y.")
    return _save(team=team, user=user, name=name, parsed=parsed, val_fraction=val_fraction,
                 test_fraction=test_fraction, seed=seed, upload=(filename, data),
                 source=Dataset.Source.UPLOAD, file_format=file_format,
                 target_column=target_column.strip() if file_format == "csv" else "")
