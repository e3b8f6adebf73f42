"""One convert-model task, on a TensorFlow worker of the cpu queue: load a model's `.keras` file
(written where the model trained, perhaps a JAX worker without TensorFlow) and make the serving
formats its worker could not (SavedModel, TFLite), as that worker would have made them."""

import socket
import tempfile
import time
from pathlib import Path

from django.conf import settings

from experiments.errors import TuneboardError
from experiments.selectors.artifacts import artifact_copy_to_path
from experiments.services.artifacts import ArtifactKind, artifact_create_from_path, artifacts_delete
from experiments.services.connections import connections_close_expired, with_db_retry
from experiments.services.conversions import (
    conversion_claim,
    conversion_complete,
    conversion_fail,
    conversion_heartbeat,
    conversion_release,
)
from workers.host.heartbeat import Heartbeat
from workers.host.memory import release_memory
from workers.host.shutdown import stop_requested
from workers.host.versions import package_versions
from workers.jobs.failures import failure_reason


class ConversionImpossible(TuneboardError):
    pass


def _load(keras, path: Path):
    # compile=False: exporting needs only the forward pass. safe_mode off: Tuneboard wrote this
    # file itself, and some application hypermodels (ResNeXt) hold Lambda layers safe mode refuses.
    return keras.saving.load_model(path, compile=False, safe_mode=False)


def _convert(row, workdir: Path):
    import keras

    from workers.export.formats import export_model

    if row.keras_artifact is None:
        raise ConversionImpossible(f"Model {row.model} has no .keras file to make the other formats from.")
    model = _load(keras, artifact_copy_to_path(artifact=row.keras_artifact, path=workdir / "model.keras"))
    exported = export_model(model, workdir=workdir / "export", name=row.model.name, version=row.model.version,
                            formats=row.formats)
    pending = [fmt for fmt in exported.pending if fmt in row.formats]
    if pending:
        raise ConversionImpossible(f"The worker {socket.gethostname()} could not make {', '.join(pending)} either: "
                                   "TensorFlow is missing there; the cpu queue's workers need it.")
    return exported


def convert_model(*, conversion_pk: int) -> str:
    import keras

    connections_close_expired()
    row = with_db_retry(conversion_claim, conversion_pk=conversion_pk, worker_host=socket.gethostname())
    if row is None:
        return "nothing to do"  # a duplicated delivery, or another worker has it
    attempt = row.attempts
    if stop_requested() and with_db_retry(conversion_release, conversion_pk=conversion_pk, attempt=attempt):
        return "released"  # claimed as its worker began to stop: another worker makes it
    environment = {"host": socket.gethostname(), "versions": package_versions()}
    started = time.monotonic()
    heartbeat = Heartbeat(lambda: conversion_heartbeat(conversion_pk=conversion_pk, attempt=attempt),
                          settings.TRIAL_HEARTBEAT_SECONDS, name=f"heartbeat-conversion-{conversion_pk}")
    heartbeat.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "export").mkdir()
            exported = _convert(row, Path(tmp))
            files = {fmt: artifact_create_from_path(team=row.model.team, kind=ArtifactKind.MODEL, path=path)
                     for fmt, path in exported.files.items() if fmt in row.formats}
            if with_db_retry(conversion_complete, conversion_pk=conversion_pk, attempt=attempt, files=files,
                             signature=exported.signature, unavailable=exported.unavailable,
                             environment=environment, duration_seconds=time.monotonic() - started):
                return "completed"
            # Requeued after a stale heartbeat, or its model deleted, while we worked: not ours to store.
            artifacts_delete(artifacts=files.values())
            return "superseded"
    except Exception as exc:  # any crash becomes a readable FAILED conversion
        with_db_retry(conversion_fail, conversion_pk=conversion_pk, attempt=attempt, environment=environment,
                      error=failure_reason(exc, job=f"conversion {conversion_pk}"))
    finally:
        heartbeat.stop()
        release_memory(keras, trial_seconds=time.monotonic() - started)
    return "failed"
