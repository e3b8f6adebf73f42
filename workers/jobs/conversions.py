"""One convert-model task, on a TensorFlow worker of the cpu queue: load a model's `.keras` file
(written where the model trained, perhaps a JAX worker without TensorFlow) and make the serving
formats its worker could not (SavedModel, TFLite), as that worker would have made them."""

import socket
import tempfile
from pathlib import Path

from experiments.errors import TuneboardError
from experiments.selectors.artifacts import artifact_copy_to_path
from experiments.services.artifacts import ArtifactKind, artifact_create_from_path, artifacts_delete
from experiments.services.connections import with_db_retry
from experiments.services.conversions import conversion_complete
from experiments.services.job_kinds import JOB_KINDS
from workers.jobs.runner import JobRun, JobWork, host_environment


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
                                   f"Keras runs on {keras.backend.backend()} there, or TensorFlow is missing; the cpu "
                                   "queue's workers need TensorFlow's backend.")
    return exported


def _work(run: JobRun) -> bool:
    row = run.row
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "export").mkdir()
        exported = _convert(row, Path(tmp))
        files = {fmt: artifact_create_from_path(team=row.model.team, kind=ArtifactKind.MODEL, path=path)
                 for fmt, path in exported.files.items() if fmt in row.formats}
        if with_db_retry(conversion_complete, conversion_pk=run.pk, attempt=run.attempt, files=files,
                         signature=exported.signature, unavailable=exported.unavailable,
                         environment=run.environment, duration_seconds=run.seconds()):
            return True
        # Requeued after a stale heartbeat, or its model deleted, while we worked: not ours to store.
        artifacts_delete(artifacts=files.values())
        return False


WORK = JobWork(_work, environment=host_environment)


def convert_model(*, conversion_pk: int) -> str:
    return WORK.run(JOB_KINDS["conversions"], conversion_pk)
