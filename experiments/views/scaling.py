"""GET /scaling/<queue>/: the work waiting for or occupying one Celery queue, for KEDA's metrics-api
trigger; its fields are listed in docs/design/job-lifecycle.md ("The scaling endpoint")."""

import hmac
import os

from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from experiments.selectors.workload import scaling_counts
from experiments.services.job_kinds import JOB_KINDS
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
