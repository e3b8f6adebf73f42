"""One quantize-model task: make a quantized variant of a model from its `.keras` file (Keras int8 or float8
on the model's own backend; TFLite on a TensorFlow worker), measure it beside the float model on the test
split, and store the file with both sets of figures."""

import tempfile
from pathlib import Path

from experiments.errors import TuneboardError
from experiments.selectors.artifacts import artifact_copy_to_path
from experiments.services.artifacts import ArtifactKind, artifact_create_from_path, artifacts_delete
from experiments.services.connections import with_db_retry
from experiments.services.job_kinds import JOB_KINDS
from experiments.services.variants import variant_complete
from workers.jobs.runner import JobRun, JobWork, host_environment
from workers.training.dataset_cache import load_dataset


class VariantImpossible(TuneboardError):
    pass


def _work(run: JobRun) -> bool:
    import keras

    from workers.export.variants import make_pair, measure, saved_model_zip

    row = run.row
    if row.keras_artifact is None:
        raise VariantImpossible(f"Model {row.model} has no .keras file to quantize.")
    data, info = load_dataset(row.model.dataset)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        # As conversions load it: the forward pass only, and Tuneboard's own file (Lambda layers).
        model = keras.saving.load_model(artifact_copy_to_path(artifact=row.keras_artifact, path=workdir / "m.keras"),
                                        compile=False, safe_mode=False)
        # Calibration rows come from the training split only (workers/export/quantization.py).
        base, made = make_pair(model, row.method, data.x_train, workdir, stem=f"{row.model.name}-v{row.model.version}",
                               seed=row.model.seed)
        figures = {name: measure(side, data.x_test, data.y_test, task=info.task, n_classes=info.n_classes)
                   for name, side in (("float", base), ("variant", made))}
        zipped = saved_model_zip(made, workdir, name=row.model.name, version=row.model.version)
        stored = []
        try:
            for path in (made.path, zipped):
                if path is not None:
                    stored.append(artifact_create_from_path(team=row.model.team, kind=ArtifactKind.MODEL, path=path))
            return with_db_retry(variant_complete, variant_pk=run.pk, attempt=run.attempt, artifact=stored[0],
                                 saved_model=stored[1] if zipped else None, figures=figures, runtime=made.runtime,
                                 environment=run.environment, duration_seconds=run.seconds())
        except BaseException:  # not stored: the files would be nobody's
            artifacts_delete(artifacts=stored)
            raise


WORK = JobWork(_work, environment=host_environment)


def quantize_model(*, variant_pk: int) -> str:
    return WORK.run(JOB_KINDS["variants"], variant_pk)
