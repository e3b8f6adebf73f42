"""How much work waits for or occupies the workers, per queue: the figures the metrics probe and
the scaling endpoint show, read here so the views run no query. Job kinds come from the caller
(services/job_kinds.py's JOB_KINDS; a selector does not import services), each counted alike."""

from django.conf import settings
from django.db import connection
from django.db.models import Count, Q, Sum
from django.utils import timezone

from experiments.models import NotificationDelivery, Study, TrainedModel, Trial, Worker
from experiments.scheduling.fair_share import quota_reason
from experiments.selectors.fair_share import queue_standing
from experiments.states import DeliveryStatus, JobStatus, StudyStatus, TrialStatus
from experiments.tuning.compute_options import JAX_SUFFIX, TASK_QUEUES, queue_backend, task_queue

ACTIVE = (JobStatus.QUEUED, JobStatus.RUNNING)


def trial_counts() -> dict[tuple[str, str], int]:
    """Trial runs by (state, study queue)."""
    return {(row["status"], row["study__queue"]): row["n"]
            for row in Trial.objects.values("status", "study__queue").annotate(n=Count("id"))}


def study_counts() -> dict[str, int]:
    return dict(Study.objects.values_list("status").annotate(n=Count("id")))


def model_job_counts() -> dict[tuple[str, str], int]:
    """Trained-model jobs by (kind: retrain, promotion, ensemble; state)."""
    return {(row["kind"], row["status"]): row["n"]
            for row in TrainedModel.objects.values("kind", "status").annotate(n=Count("id"))}


def queue_depth(*, kinds) -> dict[str, int]:
    """Queued work per Celery queue: free trial slots of running studies plus queued jobs of every
    kind, on the queue of the study a job follows (`kind.study`) or the kind's own queue."""
    depth = {queue: 0 for queue in TASK_QUEUES}
    running = Study.objects.filter(status=StudyStatus.RUNNING).annotate(
        busy=Count("trials", filter=Q(trials__status=TrialStatus.RUNNING)))
    for queue, backend, parallelism, busy in running.values_list("queue", "backend", "parallelism", "busy"):
        depth[task_queue(queue, backend)] += max(0, parallelism - busy)
    for kind in kinds:
        queued = kind.table.objects.filter(status=JobStatus.QUEUED)
        if kind.queue_column is not None:
            for queue, n in queued.values_list(kind.queue_column).annotate(n=Count("id")).order_by():
                depth[queue] = depth.get(queue, 0) + n
            continue
        if kind.study is None:
            depth[kind.queue] = depth.get(kind.queue, 0) + queued.count()
            continue
        for queue, backend, n in (queued.values_list(f"{kind.study}__queue", f"{kind.study}__backend")
                                  .annotate(n=Count("id"))):
            queue = task_queue(queue, backend) if queue else kind.queue
            depth[queue] = depth.get(queue, 0) + n
    return depth


def live_workers(*, queues) -> dict[str, int]:
    """Workers with a fresh heartbeat, per queue they serve."""
    fresh = timezone.now() - timezone.timedelta(seconds=3 * settings.WORKER_HEARTBEAT_SECONDS)
    live = {queue: 0 for queue in queues}
    for worker_queues in Worker.objects.filter(stopped__isnull=True, last_heartbeat__gte=fresh) \
            .values_list("queues", flat=True):
        for queue in worker_queues or []:
            live[queue] = live.get(queue, 0) + 1
    return live


def trial_column_buckets(*, column: str, bounds: list[float], only: dict) -> dict:
    """One aggregate over a float column of the trial rows matching `only` with the column set (keep
    them those of a partial index on the column): "count", "sum" and "le<i>", the rows at most bounds[i]."""
    # Counting the column itself (never NULL here) keeps every reference inside the index.
    return Trial.objects.filter(**only, **{f"{column}__isnull": False}).aggregate(
        count=Count(column), sum=Sum(column),
        **{f"le{i}": Count(column, filter=Q(**{f"{column}__lte": bound})) for i, bound in enumerate(bounds)})


def _kind_on_queue(kind, queue: str, accelerator: str, backend: str) -> dict:
    """Active jobs of `kind` whose tasks go to `queue`, by status."""
    rows = kind.table.objects.filter(status__in=ACTIVE)
    if kind.queue_column is not None:
        rows = rows.filter(**{kind.queue_column: queue})
    elif kind.study is None:
        if queue != kind.queue:
            return {}
    else:
        here = Q(**{f"{kind.study}__queue": accelerator, f"{kind.study}__backend": backend})
        if queue == kind.queue:  # rows that follow no study go to the kind's own queue
            here |= Q(**{f"{kind.study}__isnull": True})
        rows = rows.filter(here)
    return dict(rows.order_by().values_list("status").annotate(n=Count("id")))


def scaling_counts(*, queue: str, kinds, delivery_queue: str) -> dict:
    """Work waiting for the workers of one Celery queue ("gpu", or "gpu-jax" for JAX studies):
    the fields views/scaling.py documents, one queued_/running_ pair per job kind."""
    backend = queue_backend(queue)
    accelerator = queue.removesuffix(JAX_SUFFIX)
    running_trials = Trial.objects.filter(study__queue=accelerator, study__backend=backend,
                                          status=TrialStatus.RUNNING).count()
    queued_trials = 0
    studies = Study.objects.filter(queue=accelerator, backend=backend, status=StudyStatus.RUNNING).annotate(
        n_running=Count("trials", filter=Q(trials__status=TrialStatus.RUNNING)),
        n_started=Count("trials__trial_id", distinct=True),
    )
    # Demand a team's quota holds back is not demand a new worker could serve.
    standing = queue_standing(queue=accelerator, backend=backend, kinds=kinds, queued_jobs_wait=False)
    room = {}
    for study in studies:
        team = study.team_id
        if team not in room:
            limit = standing.policy(team).max_concurrent
            room[team] = 0 if quota_reason(standing, team) else (
                float("inf") if limit is None else limit - standing.held.get(team, 0))
        wanted = max(0, min(study.parallelism - study.n_running, study.max_trials - study.n_started, room[team]))
        room[team] -= wanted
        queued_trials += int(wanted)
    counts = {"queue": queue, "queued_trials": queued_trials, "running_trials": running_trials}
    for kind in kinds:
        by_status = _kind_on_queue(kind, queue, accelerator, backend)
        counts[f"queued_{kind.name}"] = by_status.get(JobStatus.QUEUED, 0)
        counts[f"running_{kind.name}"] = by_status.get(JobStatus.RUNNING, 0)
    counts["work"] = sum(v for k, v in counts.items() if k != "queue")
    counts["due_deliveries"] = NotificationDelivery.objects.filter(
        status=DeliveryStatus.PENDING, next_attempt__lte=timezone.now()).count() if queue == delivery_queue else 0
    counts["work"] += min(1, counts["due_deliveries"])
    return counts


def database_error() -> str | None:
    """None when the database answers a trivial query; else why not (the readiness probe's check)."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
        return None
    except Exception as error:  # any failure is "not ready", never a 500
        try:
            connection.close()  # a broken connection is not reused by the next request
        except Exception:
            pass
        return f"{type(error).__name__}: {error}".strip()[:300]
