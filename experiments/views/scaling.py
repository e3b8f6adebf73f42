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

A model goes to its study's queue; an ensemble (no study) to ENSEMBLE_QUEUE. One queued_/running_
pair per row of services/jobs.py's JOB_KINDS (selectors/workload.py counts them). The endpoint
answers only a bearer token equal to $TUNEBOARD_SCALING_TOKEN (403 when unset or wrong),
read at request time. It never imports TensorFlow.
"""

import hmac
import os

from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from experiments.selectors.workload import scaling_counts
from experiments.services.jobs import JOB_KINDS
from experiments.services.notification_delivery import QUEUE as DELIVERY_QUEUE
from experiments.tuning.compute_options import TASK_QUEUES

TOKEN_ENV = "TUNEBOARD_SCALING_TOKEN"


def _authorized(request: HttpRequest) -> bool:
    expected = os.environ.get(TOKEN_ENV, "")
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return bool(expected) and scheme.lower() == "bearer" and hmac.compare_digest(given.strip(), expected)


@require_GET
def scaling_view(request: HttpRequest, queue: str) -> JsonResponse:
    if not _authorized(request):
        return JsonResponse({"detail": "A valid scaling bearer token is required."}, status=403)
    if queue not in TASK_QUEUES:
        return JsonResponse({"detail": f"Unknown queue {queue!r}."}, status=404)
    return JsonResponse(scaling_counts(queue=queue, kinds=JOB_KINDS.values(), delivery_queue=DELIVERY_QUEUE))
