"""Reads for serving exports: where a team's TF Serving layout goes, what its registry asks to
serve (the plan a serving export writes), and the team's last export."""

from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db.models import Prefetch

from experiments.models import Artifact, ModelConversion, ModelFile, ModelVersion, RegisteredModel, ServingExport, Team
from experiments.states import JOB_ACTIVE, JobStatus
from experiments.tuning.compute_options import JAX_SUFFIX

NO_SAVEDMODEL = "Its trained model has no SavedModel file."
CONVERSION_PENDING = "Its SavedModel is still being made (a conversion is queued or running); the next export adds it."


@dataclass(frozen=True)
class VersionToServe:
    version: int
    artifact: Artifact | None  # the SavedModel zip; None: `missing` says why
    missing: str = ""


@dataclass(frozen=True)
class ModelToServe:
    name: str
    versions: list[VersionToServe]
    labels: dict[str, int] = field(default_factory=dict)


def serving_team_folder(*, team: Team) -> str:
    """The team's folder under the serving dir: named by its id, which never changes (a team's
    name may), so TF Serving's --model_config_file keeps pointing at it."""
    return f"team-{team.pk}"


def serving_folder(*, team: Team) -> Path:
    return settings.SERVING_DIR / serving_team_folder(team=team)


def serving_base_path(*, team: Team) -> str:
    """Where TF Serving sees the team's folder (models.config's base_path prefix)."""
    if settings.SERVING_BASE_PATH:
        return f"{settings.SERVING_BASE_PATH}/{serving_team_folder(team=team)}"
    return str(serving_folder(team=team))


def _missing_reason(model) -> str:
    if any(conversion.status in JOB_ACTIVE for conversion in model.conversions.all()):
        return CONVERSION_PENDING
    unavailable = (model.signature or {}).get("unavailable") or {}
    return unavailable.get(ModelFile.Format.SAVEDMODEL) or NO_SAVEDMODEL


def _variant_missing_reason(variant) -> str:
    if variant.is_tflite:
        return "A TFLite variant: TF Serving serves SavedModels, so download its file from the model page instead."
    if variant.queue.endswith(JAX_SUFFIX):
        return ("This Keras variant was made on a JAX worker, so it has no SavedModel (TF Serving's); download "
                "its .keras file from the model page instead.")
    return "This Keras variant has no SavedModel (its worker could not export one); download its .keras file instead."


def serving_plan(*, team: Team) -> list[ModelToServe]:
    """Every registered model of the team with its versions (and their SavedModel zips) and
    aliases, in a fixed number of queries."""
    savedmodels = Prefetch("trained_model__files", to_attr="savedmodel_files",
                           queryset=ModelFile.objects.filter(format=ModelFile.Format.SAVEDMODEL)
                           .select_related("artifact"))
    conversions = Prefetch("trained_model__conversions", queryset=ModelConversion.objects.only("status", "model_id"))
    versions = ModelVersion.objects.select_related("trained_model", "variant__saved_model").prefetch_related(
        savedmodels, conversions)
    registered = (RegisteredModel.objects.filter(team=team).order_by("name")
                  .prefetch_related(Prefetch("versions", queryset=versions), "aliases__version"))
    plan = []
    for model in registered:
        served = []
        for version in sorted(model.versions.all(), key=lambda v: v.version):
            if version.variant_id:  # a quantized variant: its own SavedModel, where it has one
                artifact = version.variant.saved_model
                served.append(VersionToServe(version=version.version, artifact=artifact,
                                             missing="" if artifact else _variant_missing_reason(version.variant)))
                continue
            files = version.trained_model.savedmodel_files
            served.append(VersionToServe(version=version.version, artifact=files[0].artifact if files else None,
                                         missing="" if files else _missing_reason(version.trained_model)))
        plan.append(ModelToServe(name=model.name, versions=served,
                                 labels={alias.name: alias.version.version for alias in model.aliases.all()}))
    return plan


def serving_status(*, team: Team) -> dict:
    """The serving panel's figures: the team's folder, the latest export and the latest completed one, whose report
    says what the folder holds now."""
    exports = ServingExport.objects.filter(team=team).order_by("-created", "-id")
    base_path = serving_base_path(team=team)
    folder = serving_folder(team=team)
    written_here = exports.filter(status=JobStatus.COMPLETED, report__folder=str(Path(folder).absolute()))
    return {"team_folder": serving_team_folder(team=team), "folder": str(folder),
            "base_path": base_path, "model_config_file": f"{base_path}/models.config",
            "last": exports.first(), "last_finished": written_here.first()}
