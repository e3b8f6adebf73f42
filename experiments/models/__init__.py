"""The domain's tables, one module per area, all re-exported here because Django finds an app's models through this
module, and it is the one way code names a table."""

from experiments.models.artifacts import Artifact, StoredBlob, StoredChunk
from experiments.models.audit import AuditEvent
from experiments.models.conversions import ModelConversion
from experiments.models.datasets import Dataset
from experiments.models.fleet import TeamQueuePolicy, Worker
from experiments.models.job_logs import JobLog, JobSample
from experiments.models.jobs import Job
from experiments.models.notifications import (
    SUBSCRIBABLE_EVENTS,
    EventKind,
    NotificationDelivery,
    NotificationEvent,
    NotificationPreference,
    Webhook,
)
from experiments.models.predictions import PredictionJob
from experiments.models.recipes import EnsembleRecipe, RecipeRun
from experiments.models.registry import AliasMove, ModelAlias, ModelVersion, RegisteredModel, ServingExport
from experiments.models.studies import PruningReference, Study, Trial, TrialEpoch
from experiments.models.teams import (
    ROLE_RANK,
    ApiToken,
    Invitation,
    Membership,
    PasswordResetRequest,
    SsoIdentity,
    Team,
    lower_role,
)
from experiments.models.trained_models import (
    CachedPredictions,
    EnsembleMember,
    ModelFile,
    TrainedModel,
    TrainedModelEpoch,
)
from experiments.models.trial_reruns import TrialRerun, TrialRerunEpoch
from experiments.models.variants import ModelVariant

__all__ = [
    "ROLE_RANK", "SUBSCRIBABLE_EVENTS", "AliasMove", "ApiToken", "Artifact", "AuditEvent", "CachedPredictions",
    "Dataset", "EnsembleMember", "EnsembleRecipe", "EventKind", "Invitation", "Job", "JobLog", "JobSample",
    "Membership", "ModelAlias", "ModelConversion", "ModelFile", "ModelVariant", "ModelVersion", "NotificationDelivery",
    "NotificationEvent", "NotificationPreference", "PasswordResetRequest", "PredictionJob", "PruningReference",
    "RecipeRun", "RegisteredModel", "ServingExport", "SsoIdentity", "StoredBlob", "StoredChunk", "Study", "Team",
    "TeamQueuePolicy", "TrainedModel", "TrainedModelEpoch", "Trial", "TrialEpoch", "TrialRerun", "TrialRerunEpoch",
    "Webhook", "Worker", "lower_role",
]
