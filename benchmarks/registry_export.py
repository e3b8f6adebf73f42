"""Time to export a registry to TF Serving's layout.

    python -m benchmarks.registry_export

`export_seconds(n_versions)` registers n tiny real SavedModels (small Keras classifiers exported
as their workers export them, stored in the artifact storage of a PostgreSQL install) as versions
of four registered models with `production` and `staging` aliases, then times one full export into
an empty folder, as the export_serving command runs it: reading the plan, fetching every
SavedModel zip from the storage (sha256 checked), unpacking it aside, renaming it into place and
writing models.config. benchmarks/predict.py reports it as `export_seconds_20_versions`; run alone,
this prints it as JSON.
"""

import json
import tempfile
import time
from pathlib import Path

N_NAMES = 4


def _savedmodel_zip(workdir: Path, seed: int) -> Path:
    import keras

    from workers.export.formats import export_model

    keras.utils.set_random_seed(seed)
    inputs = keras.Input(shape=(8,), name="features")
    hidden = keras.layers.Dense(16, activation="relu")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(hidden))
    exported = export_model(model, workdir=workdir, name=f"bench-{seed}", version=1, formats=["savedmodel"])
    return exported.files["savedmodel"]


def _registry(n_versions: int, workdir: Path):
    """A team whose registry holds `n_versions` versions (real SavedModel zips), with aliases."""
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from experiments.models import Artifact, ModelAlias, ModelFile, ModelVersion, RegisteredModel, TrainedModel
    from experiments.services.artifacts import artifact_create_from_path
    from experiments.services.datasets import dataset_create_bundled
    from experiments.services.teams import team_create

    user = get_user_model().objects.create_user(f"bench-registry-{time.time_ns()}", password="bench-registry")
    team = team_create(name=f"registry export {time.time_ns()}", owner=user)
    dataset = dataset_create_bundled(team=team, user=user, bundled_name="wine")
    names = [RegisteredModel.objects.create(team=team, name=f"wine-{i}", task=dataset.task,
                                            dataset_kind=dataset.kind) for i in range(N_NAMES)]
    for seed in range(n_versions):
        folder = workdir / f"model-{seed}"
        folder.mkdir()
        zipped = _savedmodel_zip(folder, seed)
        model = TrainedModel.objects.create(team=team, dataset=dataset, name=f"bench-{seed}", version=1,
                                            method="retrain", seed=seed, status="completed", finished=timezone.now())
        artifact = artifact_create_from_path(team=team, kind=Artifact.Kind.MODEL, path=zipped)
        ModelFile.objects.create(model=model, format="savedmodel", artifact=artifact)
        registered = names[seed % N_NAMES]
        ModelVersion.objects.create(registered_model=registered, version=seed // N_NAMES + 1, trained_model=model)
    for registered in names:
        versions = list(registered.versions.order_by("-version"))
        ModelAlias.objects.create(registered_model=registered, name="production", version=versions[-1])
        ModelAlias.objects.create(registered_model=registered, name="staging", version=versions[0])
    return team


def export_seconds(n_versions: int = 20) -> float:
    """Seconds of one full export of `n_versions` registered versions into an empty folder.
    Uses Django as already set up (benchmarks/predict.py), else a benchmark database of its own."""
    from django.apps import apps

    if not apps.ready:
        from benchmarks.harness import setup_django

        setup_django("tuneboard_bench_registry")
    from experiments.services.serving_exports import serving_export_here

    with tempfile.TemporaryDirectory() as tmp:
        team = _registry(n_versions, Path(tmp))
        target = Path(tmp) / "serving"
        started = time.perf_counter()
        export = serving_export_here(team=team, folder=target, base_path="/models")
        seconds = time.perf_counter() - started
        written = len(export.report["written"])
        if written != n_versions:
            raise RuntimeError(f"The export wrote {written} versions, not {n_versions}: {export.report}")
    return seconds


def main() -> None:
    print(json.dumps({"export_seconds_20_versions": round(export_seconds(20), 3)}))


if __name__ == "__main__":
    main()
