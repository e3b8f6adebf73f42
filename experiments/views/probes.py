"""Health checks (/healthz up, /readyz database and broker answer), Prometheus /metrics and request
counting; no login, no team, no TensorFlow."""

import hmac
import ipaddress
import os
import time
from pathlib import Path

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString

from experiments.selectors.device_time import device_seconds_by_team, job_device_seconds_by_team
from experiments.selectors.workload import (
    database_error,
    live_workers,
    model_job_counts,
    queue_depth,
    study_counts,
    trial_column_buckets,
    trial_counts,
)
from experiments.states import JobStatus, StudyStatus, TrialStatus

BROKER_TIMEOUT_SECONDS = 1.0

# --- health ---------------------------------------------------------------------------------


@csrf_exempt
@never_cache
def healthz(request):
    return JsonResponse({"status": "ok"})


def _check_broker() -> str | None:
    url = settings.CELERY_BROKER_URL
    try:
        if url.startswith(("redis://", "rediss://")):
            import redis

            client = redis.Redis.from_url(url, socket_timeout=BROKER_TIMEOUT_SECONDS,
                                          socket_connect_timeout=BROKER_TIMEOUT_SECONDS)
            try:
                client.ping()
            finally:
                client.close()
            return None
        if url.startswith("filesystem://"):
            folder = Path(settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("data_folder_in", ""))
            if not folder.is_dir() or not os.access(folder, os.R_OK | os.W_OK):
                return f"broker folder {folder} is missing or not writable"
            return None
        return None  # memory:// (tests): nothing to reach
    except Exception as error:
        return f"{type(error).__name__}: {error}".strip()[:300]


@csrf_exempt
@never_cache
def readyz(request):
    failures = {"database": database_error(), "broker": _check_broker()}
    body = {name: ("ok" if failure is None else "failed") for name, failure in failures.items()}
    errors = {name: failure for name, failure in failures.items() if failure is not None}
    if errors:
        body["errors"] = errors
        return JsonResponse(body, status=503)
    return JsonResponse(body)


# --- request metrics ------------------------------------------------------------------------

REQUESTS = Counter("tuneboard_http_requests", "HTTP requests answered by this process",
                   ["method", "status"])
LATENCY = Histogram("tuneboard_http_request_duration_seconds", "Time to answer a request, by route name",
                    ["route"], buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
_METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}


class RequestMetricsMiddleware:
    """Counts each request by method and status class (2xx...), times it by route name."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        try:
            match = getattr(request, "resolver_match", None)
            route = (match.view_name or match.route) if match else "unmatched"
            method = request.method if request.method in _METHODS else "other"
            REQUESTS.labels(method=method, status=f"{response.status_code // 100}xx").inc()
            LATENCY.labels(route=route or "unnamed").observe(time.perf_counter() - started)
        except Exception:
            pass  # metrics never break a response
        return response


# --- database gauges, computed at scrape time -------------------------------------------------

CLAIM_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
DURATION_BUCKETS = (1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600)


class _TrialHistogram:
    """A histogram over one float column of the trial rows, counted by the database in one
    aggregate query (a COUNT ... FILTER per bucket). The rows counted (`only`, column not NULL)
    are exactly those of a partial index on the column in Trial.Meta, so the scan reads that
    index alone, not the wide trial rows: keep the two in step."""

    def __init__(self, name: str, doc: str, column: str, scale: float, buckets: tuple, only: dict):
        self.name, self.doc, self.column, self.scale, self.buckets = name, doc, column, scale, buckets
        self.only = only

    def family(self) -> HistogramMetricFamily:
        found = trial_column_buckets(column=self.column, bounds=[bound * self.scale for bound in self.buckets],
                                     only=self.only)
        buckets = [(floatToGoString(bound), found[f"le{i}"]) for i, bound in enumerate(self.buckets)]
        buckets.append(("+Inf", found["count"]))
        return HistogramMetricFamily(self.name, self.doc, buckets=buckets, sum_value=(found["sum"] or 0.0) / self.scale)


TRIAL_HISTOGRAMS = (
    _TrialHistogram("tuneboard_trial_claim_seconds", "Time a wake-up claim took to hand out a trial, from asking "
                    "for the study's lock to the trial's row (trials a finisher claimed are not counted)",
                    "claim_ms", 1000, CLAIM_BUCKETS, {}),
    _TrialHistogram("tuneboard_trial_duration_seconds", "Duration of completed trial runs", "duration_seconds", 1,
                    DURATION_BUCKETS, {"status": TrialStatus.COMPLETED}),
)


class DatabaseCollector:
    """Cheap aggregate queries over the job tables, run on each scrape."""

    def describe(self):
        return []  # no queries at registration time

    def collect(self):
        from experiments.models import Study
        from experiments.services.job_kinds import JOB_KINDS

        queues = [choice for choice, _ in Study.Queue.choices]
        up = GaugeMetricFamily("tuneboard_database_up", "1 when the metrics queries could run")
        try:
            trials = GaugeMetricFamily("tuneboard_trials", "Trial runs by state and queue", labels=["state", "queue"])
            counts = trial_counts()
            for state in TrialStatus.values:
                for queue in queues:
                    trials.add_metric([state, queue], counts.get((state, queue), 0))

            lost = GaugeMetricFamily("tuneboard_trials_lost", "Trial runs lost (their worker stopped heartbeating)")
            lost.add_metric([], sum(n for (state, _), n in counts.items() if state == TrialStatus.LOST))

            studies = GaugeMetricFamily("tuneboard_studies", "Studies by state", labels=["state"])
            by_state = study_counts()
            for state in StudyStatus.values:
                studies.add_metric([state], by_state.get(state, 0))

            models = GaugeMetricFamily("tuneboard_model_jobs", "Model and ensemble jobs by state",
                                       labels=["kind", "state"])
            model_counts = model_job_counts()
            for kind in JOB_KINDS["models"].table.Kind.values:
                for state in JobStatus.values:
                    models.add_metric([kind, state], model_counts.get((kind, state), 0))

            # Per Celery queue: a JAX study's work waits on "<queue>-jax" (compute_options.task_queue).
            queue_depth_family = GaugeMetricFamily(
                "tuneboard_queue_depth", "Queued work (free trial slots of running studies, queued model jobs, "
                "trial re-runs, conversions, serving exports and batch predictions) per queue", labels=["queue"])
            for queue, n in sorted(queue_depth(kinds=JOB_KINDS.values()).items()):
                queue_depth_family.add_metric([queue], n)

            workers = GaugeMetricFamily("tuneboard_workers_live", "Workers with a fresh heartbeat, per queue",
                                        labels=["queue"])
            for queue, n in sorted(live_workers(queues=queues).items()):
                workers.add_metric([queue], n)

            device_time = CounterMetricFamily(
                "tuneboard_trial_device_seconds", "Ended trials' wall time times the devices they held, per team id "
                "and device kind", labels=["team", "device_kind"])
            for (team, kind), seconds in sorted(device_seconds_by_team().items()):
                device_time.add_metric([str(team), kind], seconds)
            job_device_time = CounterMetricFamily(
                "tuneboard_job_device_seconds", "Jobs' runs' wall time times the devices they held (every attempt), "
                "per team id, job kind and device kind", labels=["team", "job_kind", "device_kind"])
            for (team, job_kind, kind), seconds in sorted(job_device_seconds_by_team(kinds=JOB_KINDS.values()).items()):
                job_device_time.add_metric([str(team), job_kind, kind], seconds)

            histograms = [histogram.family() for histogram in TRIAL_HISTOGRAMS]
        except Exception:
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield from (up, trials, lost, studies, models, queue_depth_family, workers, device_time, job_device_time,
                    *histograms)


_collector = DatabaseCollector()
try:
    REGISTRY.register(_collector)
except ValueError:
    pass  # already registered (module reloaded)


# --- the /metrics view ----------------------------------------------------------------------


def _private_client(request) -> bool:
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return address.is_private or address.is_loopback


@csrf_exempt
@never_cache
def metrics(request):
    if not settings.METRICS_ENABLED:
        return HttpResponse("Metrics are off (TUNEBOARD_METRICS=off).\n", status=404, content_type="text/plain")
    token = os.environ.get("TUNEBOARD_METRICS_TOKEN", "")
    if token:
        if not hmac.compare_digest(request.headers.get("Authorization", "").encode(), f"Bearer {token}".encode()):
            return HttpResponse("A metrics token is required.\n", status=403, content_type="text/plain")
    elif not _private_client(request):
        return HttpResponse("Metrics are served to private addresses only (or set TUNEBOARD_METRICS_TOKEN).\n",
                            status=403, content_type="text/plain")
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
