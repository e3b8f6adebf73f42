"""What a worker reads before it trains, each row loaded with what the job then touches in one query, since workers
never query the ORM themselves."""

from experiments.models import Artifact, EnsembleMember, Study, TrainedModel, TrainedModelEpoch, Trial
from experiments.states import TrialStatus

# trained_models.model_record_epoch's `phase`: best-epoch detection, then the retraining itself.
TrainingPhase = TrainedModelEpoch.Phase


def study_for_training(*, study_id: int) -> Study:
    return Study.objects.select_related("dataset__arrays", "dataset__upload", "team").get(pk=study_id)


def trial_checkpoint_continued(*, study: Study, trial_id: str) -> Artifact | None:
    """The checkpoint of the trial (KerasTuner's trial id) that a Hyperband trial continues: its
    latest completed attempt's; None when it has none."""
    parent = (
        Trial.objects.filter(study=study, trial_id=trial_id, status=TrialStatus.COMPLETED)
        .exclude(checkpoint=None).select_related("checkpoint").order_by("-number").first()
    )
    return None if parent is None else parent.checkpoint


def trial_resume_artifacts(*, study: Study, ids: list[int]) -> dict[int, Artifact]:
    """The weights a preempted attempt left for the next one (Trial.resume), of the study's team only."""
    return {a.pk: a for a in Artifact.objects.filter(pk__in=ids, team_id=study.team_id)}


def ensemble_members(*, ensemble: TrainedModel) -> list[EnsembleMember]:
    return list(ensemble.members.select_related("model__trial__study", "model__study", "trial__study",
                                                "trial__checkpoint"))


def model_file_artifact(*, model: TrainedModel, file_format: str) -> Artifact | None:
    file = model.files.filter(format=file_format).select_related("artifact").first()
    return None if file is None else file.artifact
