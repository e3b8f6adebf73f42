"""GET /scaling/<queue>/: how much work waits for or occupies the workers of one Celery
queue, for KEDA's metrics-api trigger (deploy/kubernetes/; valueLocation "work").

    queued_trials   free trial slots of RUNNING studies on the queue: for each study,
                    min(parallelism - running trials, max_trials - trials started), at least 0
    running_trials  RUNNING trials of studies on the queue
    queued_models   QUEUED trained models whose task goes to the queue
    running_models  RUNNING trained models whose task goes to the queue
    queued_reruns   QUEUED trial re-runs of studies on the queue
    running_reruns  RUNNING trial re-runs of studies on the queue
    queued_conversions   QUEUED conversions (SavedModel/TFLite from a model's .keras file; their
                    tasks go to CONVERSION_QUEUE, "cpu")
    running_conversions  RUNNING conversions, on that queue
    queued_serving_exports   QUEUED serving exports (TF Serving layout of a team's registry; their
                    tasks go to SERVING_EXPORT_QUEUE, "cpu")
    running_serving_exports  RUNNING serving exports, on that queue
    queued_predictions   QUEUED batch predictions whose model goes to the queue (as its model would)
    running_predictions  RUNNING batch predictions on the queue
    due_deliveries  notification e-mails and webhook calls due now (their tasks go to the cpu queue)
    work            the sum, counting due deliveries as one (one worker sends them all): the number of
                    worker processes (concurrency 1) that have something to do

A model goes to its study's queue; an ensemble (no study) to ENSEMBLE_QUEUE. The endpoint
answers only a bearer token equal to $TUNEBOARD_SCALING_TOKEN (403 when unset or wrong),
read at request time. It never imports TensorFlow.
"""

import hmac
import os

from django.db.models import Count, Q
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_GET

from experiments.models import (
    ModelConversion,
    NotificationDelivery,
    PredictionJob,
    ServingExport,
    Study,
    TrainedModel,
    Trial,
    TrialRerun,
)
from experiments.services.conversions import CONVERSION_QUEUE
from experiments.services.model_runs import ENSEMBLE_QUEUE
from experiments.services.notification_delivery import QUEUE as DELIVERY_QUEUE
from experiments.services.serving_exports import SERVING_EXPORT_QUEUE
from experiments.states import DeliveryStatus, JobStatus, StudyStatus, TrialStatus
from experiments.tuning.compute_options import JAX_SUFFIX, TASK_QUEUES, queue_backend

TOKEN_ENV = "TUNEBOARD_SCALING_TOKEN"


def _authorized(request: HttpRequest) -> bool:
    expected = os.environ.get(TOKEN_ENV, "")
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return bool(expected) and scheme.lower() == "bearer" and hmac.compare_digest(given.strip(), expected)


def _by_status(table) -> dict:
    """Active jobs of a table whose tasks all go to one queue, by status."""
    return dict(table.objects.filter(status__in=(JobStatus.QUEUED, JobStatus.RUNNING))
                .order_by().values_list("status").annotate(n=Count("id")))


def scaling_counts(queue: str) -> dict:
    """Work waiting for the workers of one Celery queue ("gpu", or "gpu-jax" for JAX studies)."""
    backend = queue_backend(queue)
    accelerator = queue.removesuffix(JAX_SUFFIX)
    studies_here = Q(study__queue=accelerator, study__backend=backend)
    running_trials = Trial.objects.filter(studies_here, status=TrialStatus.RUNNING).count()
    queued_trials = 0
    studies = Study.objects.filter(queue=accelerator, backend=backend, status=StudyStatus.RUNNING).annotate(
        n_running=Count("trials", filter=Q(trials__status=TrialStatus.RUNNING)),
        n_started=Count("trials__trial_id", distinct=True),
    )
    for study in studies:
        queued_trials += max(0, min(study.parallelism - study.n_running, study.max_trials - study.n_started))
    models = TrainedModel.objects.filter(status__in=(JobStatus.QUEUED, JobStatus.RUNNING))
    models = models.filter(studies_here | Q(study__isnull=True)) if queue == ENSEMBLE_QUEUE \
        else models.filter(studies_here)
    by_status = dict(models.order_by().values_list("status").annotate(n=Count("id")))
    # A prediction runs where its model trained (services/model_runs.model_queue).
    predictions_here = Q(model__study__queue=accelerator, model__study__backend=backend)
    if queue == ENSEMBLE_QUEUE:
        predictions_here |= Q(model__study__isnull=True)
    predictions = dict(PredictionJob.objects.filter(predictions_here, status__in=(JobStatus.QUEUED,
                                                                                  JobStatus.RUNNING))
                       .order_by().values_list("status").annotate(n=Count("id")))
    reruns = dict(TrialRerun.objects.filter(trial__study__queue=accelerator, trial__study__backend=backend,
                                            status__in=(JobStatus.QUEUED, JobStatus.RUNNING))
                  .order_by().values_list("status").annotate(n=Count("id")))
    conversions = _by_status(ModelConversion) if queue == CONVERSION_QUEUE else {}
    exports = _by_status(ServingExport) if queue == SERVING_EXPORT_QUEUE else {}
    counts = {
        "queue": queue,
        "queued_trials": queued_trials,
        "running_trials": running_trials,
        "queued_models": by_status.get(JobStatus.QUEUED, 0),
        "running_models": by_status.get(JobStatus.RUNNING, 0),
        "queued_reruns": reruns.get(JobStatus.QUEUED, 0),
        "running_reruns": reruns.get(JobStatus.RUNNING, 0),
        "queued_conversions": conversions.get(JobStatus.QUEUED, 0),
        "running_conversions": conversions.get(JobStatus.RUNNING, 0),
        "queued_serving_exports": exports.get(JobStatus.QUEUED, 0),
        "running_serving_exports": exports.get(JobStatus.RUNNING, 0),
        "queued_predictions": predictions.get(JobStatus.QUEUED, 0),
        "running_predictions": predictions.get(JobStatus.RUNNING, 0),
    }
    counts["work"] = sum(v for k, v in counts.items() if k != "queue")
    counts["due_deliveries"] = NotificationDelivery.objects.filter(
        status=DeliveryStatus.PENDING, next_attempt__lte=timezone.now()).count() if queue == DELIVERY_QUEUE else 0
    counts["work"] += min(1, counts["due_deliveries"])
    return counts


@require_GET
def scaling_view(request: HttpRequest, queue: str) -> JsonResponse:
    if not _authorized(request):
        return JsonResponse({"detail": "A valid scaling bearer token is required."}, status=403)
    if queue not in TASK_QUEUES:
        return JsonResponse({"detail": f"Unknown queue {queue!r}."}, status=404)
    return JsonResponse(scaling_counts(queue))
