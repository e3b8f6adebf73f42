"""Tuneboard settings, everything deployment-specific from the environment; with nothing set it runs embedded
(SQLite, a filesystem broker, ./var), production sets DATABASE_URL and CELERY_BROKER_URL."""

import importlib.util
import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from webapp.env import (
    env_bool,
    env_choice,
    env_float,
    env_group_roles,
    env_header_value,
    env_int,
    env_list,
    env_networks,
    env_prices,
    env_secret_key,
    env_str,
    private_dir,
    private_file,
    redact_url,
)

BASE_DIR = Path(__file__).resolve().parent.parent
# The embedded mode keeps its database (password hashes, webhook secrets), artifacts, broker messages here (0700).
VAR_DIR = private_dir(Path(env_str("TUNEBOARD_VAR_DIR", str(BASE_DIR / "var"))), tighten=False)

DEBUG = env_bool("DEBUG", False)
# The embedded defaults (no DATABASE_URL, no CELERY_BROKER_URL: `make run`'s checkout) sign with
# the key made once in VAR_DIR/secret_key, so `manage.py` commands there need no SECRET_KEY; a
# deployment names its database and broker and must set a key of its own.
EMBEDDED = not os.environ.get("DATABASE_URL") and not os.environ.get("CELERY_BROKER_URL")
SECRET_KEY = env_secret_key("SECRET_KEY", debug=DEBUG, key_file=VAR_DIR / "secret_key" if EMBEDDED else None)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# HTTPS. gunicorn serves plain HTTP, so TLS always ends at a proxy (an Ingress, a load balancer)
# that must set X-Forwarded-Proto and overwrite any a client sent. TUNEBOARD_HTTPS=true turns
# everything on at once; each variable below overrides its own part.
HTTPS = env_bool("TUNEBOARD_HTTPS", False)
SECURE_PROXY_SSL_HEADER = env_header_value(
    "SECURE_PROXY_SSL_HEADER", ("HTTP_X_FORWARDED_PROTO", "https") if HTTPS else None
)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", HTTPS)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", HTTPS)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", HTTPS)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 365 * 24 * 3600 if HTTPS else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", HTTPS)
# Opt-in even with TUNEBOARD_HTTPS: once a domain is on the browsers' preload list, taking it off
# takes months, and every subdomain of it must then serve HTTPS.
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
# Kubelet probes, Prometheus and KEDA call the pods over plain HTTP inside the cluster: a
# redirect to https:// would fail them all. Patterns match the path without its leading slash.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$", r"^scaling/"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "rest_framework",
    "knox",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "auditlog",
    "experiments",
]

# TUNEBOARD_METRICS=off takes request counting off every request and /metrics answers 404
# (trials still record their claim time: one float in a row written anyway).
METRICS_ENABLED = env_bool("TUNEBOARD_METRICS", True)
METRICS_MIDDLEWARE = "experiments.views.probes.RequestMetricsMiddleware"
MIDDLEWARE = [
    *([METRICS_MIDDLEWARE] if METRICS_ENABLED else []),
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "experiments.middleware.RequestChecksMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "experiments.middleware.CurrentTeamMiddleware",
    "experiments.middleware.AuditContextMiddleware",
    # Last, as django-axes requires: it turns a locked-out login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "webapp.urls"
WSGI_APPLICATION = "webapp.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "experiments.context_processors.current_team",
                "experiments.context_processors.single_sign_on",
            ],
            "builtins": ["experiments.templatetags.tuneboard"],
        },
    },
]


def _database(url: str) -> dict:
    try:
        config = dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
    except Exception as exc:  # dj-database-url raises several types for bad URLs
        raise ImproperlyConfigured(
            f"DATABASE_URL is not a database URL ({exc}): {redact_url(url)!r}"
        ) from exc
    engine = config.get("ENGINE", "")
    if engine.endswith("sqlite3"):
        # Created owner-only before SQLite opens it (its -wal and -shm files copy the mode).
        if config.get("NAME") and config["NAME"] != ":memory:":
            private_file(Path(config["NAME"]))
        # The embedded worker writes while the web reads: wait for locks instead of failing,
        # and take the write lock at BEGIN so claims serialise like a row lock would.
        config["CONN_MAX_AGE"] = 0
        config["OPTIONS"] = {
            "timeout": 30,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    elif not engine.endswith("postgresql"):
        raise ImproperlyConfigured(f"DATABASE_URL must be postgres:// or sqlite://, got {redact_url(url)!r}.")
    return config


DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'tuneboard.sqlite3'}")
DATABASES = {"default": _database(DATABASE_URL)}
USING_POSTGRES = DATABASES["default"]["ENGINE"].endswith("postgresql")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

# Login rate limiting (django-axes, counted in the database so every web process and pod sees
# the same failures): after LOGIN_FAILURE_LIMIT failed logins for one username from one client
# address, that pair is refused, even with the right password, until LOGIN_LOCKOUT_MINUTES
# have passed since its last failed attempt.
AUTHENTICATION_BACKENDS = [
    "experiments.security.login_limits.LoginLimitBackend",
    "django.contrib.auth.backends.ModelBackend",
]
LOGIN_FAILURE_LIMIT = env_int("TUNEBOARD_LOGIN_FAILURE_LIMIT", 5, minimum=1)
LOGIN_LOCKOUT_MINUTES = env_int("TUNEBOARD_LOGIN_LOCKOUT_MINUTES", 15, minimum=1)
# How many proxies in front of the web append to X-Forwarded-For. 0: the header is ignored
# (anyone can send one) and the client is REMOTE_ADDR.
TRUSTED_PROXY_COUNT = env_int("TUNEBOARD_TRUSTED_PROXIES", 0, minimum=0)
AXES_FAILURE_LIMIT = LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=LOGIN_LOCKOUT_MINUTES)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_CLIENT_IP_CALLABLE = "experiments.security.login_limits.client_ip"
AXES_LOCKOUT_CALLABLE = "experiments.security.login_limits.locked_out"
AXES_RESET_ON_SUCCESS = True
# A wrong current password on /password/change/ counts too; what was typed is never stored.
AXES_SENSITIVE_PARAMETERS = ["old_password", "new_password1", "new_password2"]
# Password-reset mails per address asked for, and per client address, in any hour.
PASSWORD_RESETS_PER_ADDRESS = env_int("TUNEBOARD_PASSWORD_RESETS_PER_ADDRESS", 3, minimum=1)
PASSWORD_RESETS_PER_CLIENT = env_int("TUNEBOARD_PASSWORD_RESETS_PER_CLIENT", 10, minimum=1)
# Only the failure counters are needed; a row per successful login would grow forever.
AXES_DISABLE_ACCESS_LOG = True
# Its start-up banner would open every process's log (each worker child, each manage.py command).
AXES_VERBOSE = False

# Single sign-on with OpenID Connect (mozilla-django-oidc; experiments/services/sso.py): on when
# TUNEBOARD_OIDC_CLIENT_ID is set, beside local accounts. The provider's endpoints are named
# explicitly (no discovery request at start-up). Groups in the claim TUNEBOARD_OIDC_GROUPS_CLAIM
# map to team roles by TUNEBOARD_OIDC_GROUP_ROLES ("ml-platform=Acme:editor,ml-leads=Acme:owner").
OIDC_RP_CLIENT_ID = env_str("TUNEBOARD_OIDC_CLIENT_ID", "")
SSO_ENABLED = bool(OIDC_RP_CLIENT_ID)
SSO_PROVIDER_NAME = env_str("TUNEBOARD_OIDC_PROVIDER_NAME", "single sign-on")
OIDC_RP_CLIENT_SECRET = env_str("TUNEBOARD_OIDC_CLIENT_SECRET", "")
OIDC_OP_AUTHORIZATION_ENDPOINT = env_str("TUNEBOARD_OIDC_AUTHORIZATION_ENDPOINT", "")
OIDC_OP_TOKEN_ENDPOINT = env_str("TUNEBOARD_OIDC_TOKEN_ENDPOINT", "")
OIDC_OP_USER_ENDPOINT = env_str("TUNEBOARD_OIDC_USERINFO_ENDPOINT", "")
OIDC_OP_JWKS_ENDPOINT = env_str("TUNEBOARD_OIDC_JWKS_ENDPOINT", "")
OIDC_RP_SIGN_ALGO = env_str("TUNEBOARD_OIDC_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = env_str("TUNEBOARD_OIDC_SCOPES", "openid email profile")
# An ID token names its signing key ("kid") with every provider we know; one that signs with a
# single key and leaves it out needs false here.
OIDC_VERIFY_KID = env_bool("TUNEBOARD_OIDC_VERIFY_KID", True)
SSO_GROUPS_CLAIM = env_str("TUNEBOARD_OIDC_GROUPS_CLAIM", "groups")
SSO_GROUP_ROLES = env_group_roles("TUNEBOARD_OIDC_GROUP_ROLES", ("owner", "editor", "viewer"))
OIDC_AUTHENTICATION_CALLBACK_URL = "sso_callback"
if SSO_ENABLED:
    _missing = [name for name, value in (
        ("TUNEBOARD_OIDC_CLIENT_SECRET", OIDC_RP_CLIENT_SECRET),
        ("TUNEBOARD_OIDC_AUTHORIZATION_ENDPOINT", OIDC_OP_AUTHORIZATION_ENDPOINT),
        ("TUNEBOARD_OIDC_TOKEN_ENDPOINT", OIDC_OP_TOKEN_ENDPOINT),
        ("TUNEBOARD_OIDC_USERINFO_ENDPOINT", OIDC_OP_USER_ENDPOINT),
        ("TUNEBOARD_OIDC_JWKS_ENDPOINT", OIDC_OP_JWKS_ENDPOINT)) if not value]
    if _missing:
        raise ImproperlyConfigured(f"TUNEBOARD_OIDC_CLIENT_ID is set, so single sign-on is on; it also needs "
                                   f"{', '.join(_missing)}.")
    AUTHENTICATION_BACKENDS = [*AUTHENTICATION_BACKENDS, "experiments.services.sso.SsoBackend"]

# E-mail: team invitations and password resets. Without EMAIL_HOST the mail is printed by the
# web process (the console backend), so the embedded mode needs no mail server.
EMAIL_HOST = env_str("EMAIL_HOST", "")
EMAIL_BACKEND = env_str(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend" if EMAIL_HOST else "django.core.mail.backends.console.EmailBackend",
)


def _module_exists(dotted: str) -> bool:
    try:
        return importlib.util.find_spec(dotted) is not None
    except ImportError:  # a parent package is missing
        return False


# Checked without importing the backend, so a typo stops start-up instead of the first e-mail.
if "." not in EMAIL_BACKEND or not _module_exists(EMAIL_BACKEND.rpartition(".")[0]):
    raise ImproperlyConfigured(
        f"EMAIL_BACKEND must be the dotted path of an e-mail backend class, got {EMAIL_BACKEND!r}."
    )
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    raise ImproperlyConfigured("EMAIL_USE_TLS and EMAIL_USE_SSL cannot both be true: pick one (TLS for port 587).")
EMAIL_PORT = env_int("EMAIL_PORT", 465 if EMAIL_USE_SSL else 587 if EMAIL_USE_TLS else 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
# A mail server that does not answer must not hold a web worker until gunicorn kills it.
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10, minimum=1)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "tuneboard@localhost")
SERVER_EMAIL = DEFAULT_FROM_EMAIL
# Where the filebased backend (EMAIL_BACKEND=django.core.mail.backends.filebased.EmailBackend) writes.
EMAIL_FILE_PATH = env_str("EMAIL_FILE_PATH", str(VAR_DIR / "mail"))

# Notifications (e-mail per user, webhooks per team) link to pages under this address: mail and
# webhooks are sent by workers, which have no request to take the host from.
SITE_URL = env_str("TUNEBOARD_SITE_URL", "http://127.0.0.1:8000").rstrip("/")
if not SITE_URL.startswith(("http://", "https://")):
    raise ImproperlyConfigured(f"TUNEBOARD_SITE_URL must start with http:// or https://, got {SITE_URL!r}.")
# A failed delivery is tried again after RETRY, 2 x RETRY, 4 x RETRY ... seconds, MAX_ATTEMPTS times in all
# (30 s and 6: the last try is about 15 minutes after the first).
NOTIFY_RETRY_SECONDS = env_int("TUNEBOARD_NOTIFY_RETRY_SECONDS", 30, minimum=1)
NOTIFY_MAX_ATTEMPTS = env_int("TUNEBOARD_NOTIFY_MAX_ATTEMPTS", 6, minimum=1)
# A receiver that does not answer must not hold a worker for long.
WEBHOOK_TIMEOUT_SECONDS = env_int("TUNEBOARD_WEBHOOK_TIMEOUT_SECONDS", 5, minimum=1)
# Webhooks call public addresses only (experiments/security/egress.py); these networks (CIDRs,
# comma-separated, e.g. "10.20.0.0/16,192.168.5.7/32") are allowed as well, for internal receivers.
WEBHOOK_ALLOWED_NETWORKS = env_networks("TUNEBOARD_WEBHOOK_ALLOWED_NETWORKS")
# How long an invitation link to a team stays valid.
INVITATION_DAYS = env_int("TUNEBOARD_INVITATION_DAYS", 7, minimum=1)

# The audit log (experiments/services/audit.py; django-auditlog with a team column): kept this many days.
AUDIT_DAYS = env_int("TUNEBOARD_AUDIT_DAYS", 365, minimum=1)
# What a trial or job printed: kept this many days, and per run its first and last KB (the
# middle of a print storm is cut, with a marker); the worker writes it every few seconds.
JOB_LOG_DAYS = env_int("TUNEBOARD_JOB_LOG_DAYS", 30, minimum=1)
JOB_LOG_HEAD_KB = env_int("TUNEBOARD_JOB_LOG_HEAD_KB", 64, minimum=1)
JOB_LOG_TAIL_KB = env_int("TUNEBOARD_JOB_LOG_TAIL_KB", 192, minimum=1)
JOB_LOG_FLUSH_SECONDS = env_int("TUNEBOARD_JOB_LOG_FLUSH_SECONDS", 2, minimum=1)
# A running trial's or job's CPU %, RSS, host load and GPU figures (NVML), sampled this often.
SYSTEM_SAMPLE_SECONDS = env_int("TUNEBOARD_SYSTEM_SAMPLE_SECONDS", 5, minimum=1)
# A JAX trial on one device keeps its training and validation rows on the device when they fit
# in this percent of its free memory (0: never); larger ones are read from the host each step.
DEVICE_INPUT_PERCENT = env_int("TUNEBOARD_DEVICE_INPUT_PERCENT", 50, minimum=0)
# What a device-hour costs per queue ("gpu=2.5,tpu=4,cpu=0.05", in PRICE_CURRENCY): device time
# is then shown as money too. Unset: time only.
DEVICE_HOUR_PRICES = env_prices("TUNEBOARD_DEVICE_HOUR_PRICES", ("cpu", "gpu", "tpu"))
PRICE_CURRENCY = env_str("TUNEBOARD_PRICE_CURRENCY", "USD")
AUDITLOG_LOGENTRY_MODEL = "experiments.AuditEvent"
AUDITLOG_USE_FK_STRING_REPRESENTATION = True  # "alice", not a user id, in the recorded changes
AUDITLOG_STORE_JSON_CHANGES = True

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
# Plotly's browser bundle ships inside the installed `plotly` package: the machines are
# offline, so charts never come from a CDN. Found without importing plotly.
STATICFILES_DIRS = [
    BASE_DIR / "static",
    ("plotly", Path(importlib.util.find_spec("plotly").submodule_search_locations[0]) / "package_data"),
]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns on every request otherwise

# Artifacts: dataset files, checkpoints and models. "database" keeps the bytes in
# PostgreSQL (chunked) so a worker host needs nothing but PostgreSQL and Redis.
ARTIFACT_STORAGE = env_choice(
    "TUNEBOARD_ARTIFACT_STORAGE",
    "database" if USING_POSTGRES else "filesystem",
    ("database", "filesystem"),
)
ARTIFACT_DIR = Path(env_str("TUNEBOARD_ARTIFACT_DIR", str(VAR_DIR / "artifacts")))
if ARTIFACT_STORAGE == "filesystem":
    private_dir(ARTIFACT_DIR)
FILE_UPLOAD_PERMISSIONS = 0o600
FILE_UPLOAD_DIRECTORY_PERMISSIONS = 0o700
ARTIFACT_CHUNK_BYTES = env_int("TUNEBOARD_ARTIFACT_CHUNK_BYTES", 1024 * 1024, minimum=1024)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "artifacts": (
        {"BACKEND": "experiments.storage.DatabaseStorage"}
        if ARTIFACT_STORAGE == "database"
        else {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(ARTIFACT_DIR), "file_permissions_mode": 0o600,
                        "directory_permissions_mode": 0o700},
        }
    ),
}

UPLOAD_MAX_MB = env_int("TUNEBOARD_UPLOAD_MAX_MB", 50, minimum=1)
# Uploads above this go to a temp file instead of memory; parsing reads that file in blocks.
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
# What an upload may become once parsed (experiments.datasets.core.DatasetLimits): its arrays
# unpacked (they stay on disk, not in the web process), its rows (the web holds ~100 bytes a
# row while splitting) and the classes of a classification target.
MAX_DATASET_MB = env_int("TUNEBOARD_MAX_DATASET_MB", 2048, minimum=1)
MAX_DATASET_ROWS = env_int("TUNEBOARD_MAX_DATASET_ROWS", 1_000_000, minimum=10)
MAX_CLASSES = env_int("TUNEBOARD_MAX_CLASSES", 1_000, minimum=2)

# TF Serving's layout of each team's registry (experiments/serving/layout.py), written by the cpu
# queue's workers into <SERVING_DIR>/team-<id>/ (not private: TF Serving, another user, reads it).
# SERVING_BASE_PATH: where TF Serving sees SERVING_DIR (its mount, e.g. /models), which
# models.config's base_path entries start with; empty: SERVING_DIR's own path (same host).
SERVING_DIR = Path(env_str("TUNEBOARD_SERVING_DIR", str(VAR_DIR / "serving"))).absolute()
SERVING_BASE_PATH = env_str("TUNEBOARD_SERVING_BASE_PATH", "").rstrip("/")

# A quantized variant losing more test accuracy than this (0.01: one point), or MAE by this fraction, is flagged.
QUANTIZATION_WARN_ACCURACY_DROP = env_float("TUNEBOARD_QUANTIZATION_WARN_ACCURACY_DROP", 0.01, minimum=0.0)

# Team-provided hypermodels installed on the workers: "name=pkg.module:build_model,...".
HYPERMODELS = env_list("TUNEBOARD_HYPERMODELS", [])

# Celery. The database decides what runs; the broker only carries wake-ups.
MAX_TRIAL_SECONDS = env_int("TUNEBOARD_MAX_TRIAL_SECONDS", 6 * 3600, minimum=60)
# Recovery from a worker killed mid-trial takes at most STALE + REAPER_INTERVAL seconds (25 s
# by default) before the trial is retried elsewhere. Shorter costs more heartbeat writes (one
# tiny UPDATE per running job per beat) and risks declaring a busy worker dead; the stale
# threshold stays 4 beats, so three in a row must be missed. Jobs heartbeat from their own
# thread, so long epochs and long checkpoint writes keep beating.
TRIAL_HEARTBEAT_SECONDS = env_int("TUNEBOARD_TRIAL_HEARTBEAT_SECONDS", 5, minimum=1)
# A RUNNING trial or model whose heartbeat is older than this is lost (its worker died).
TRIAL_STALE_SECONDS = env_int("TUNEBOARD_TRIAL_STALE_SECONDS", 4 * TRIAL_HEARTBEAT_SECONDS, minimum=2)
WORKER_HEARTBEAT_SECONDS = env_int("TUNEBOARD_WORKER_HEARTBEAT_SECONDS", 5, minimum=1)
REAPER_INTERVAL_SECONDS = env_int("TUNEBOARD_REAPER_INTERVAL_SECONDS", 5, minimum=1)
# A wake-up or model task not picked up by a worker this long after it was sent counts as lost
# (a Redis restart, the broker down) and is sent again; the wait doubles with each unanswered
# resend, up to 32x, so a queue no worker serves does not fill up. Duplicates are harmless.
RESEND_AFTER_SECONDS = env_int("TUNEBOARD_RESEND_AFTER_SECONDS", 30, minimum=1)
# A run-trial task keeps claiming its study's next trial itself (no trip through the broker)
# for this long, then hands the slot back so other studies and jobs on the queue get a turn.
CONTINUE_SECONDS = env_int("TUNEBOARD_CONTINUE_SECONDS", 60, minimum=0)
# A freed slot goes to the team furthest below its share of the queue, then by study priority, then
# by age, whichever study's wake-up reached the worker (experiments/services/fair_share.py). Off: the
# broker's order, as before. Team quotas hold either way.
FAIR_SHARE = env_bool("TUNEBOARD_FAIR_SHARE", True)
# Between teams holding equal shares of a queue now, the one whose trials held its slots least over
# this many seconds goes first, so a spare slot goes round.
FAIR_SHARE_WINDOW_SECONDS = env_int("TUNEBOARD_FAIR_SHARE_WINDOW_SECONDS", 3600, minimum=1)
# A study held by its team's quota asks again this often (one wake-up of it circulates meanwhile).
QUOTA_POLL_SECONDS = env_int("TUNEBOARD_QUOTA_POLL_SECONDS", 5, minimum=1)
# Queues on which a team below its share, or a higher-priority study, waiting with every slot busy
# makes the reaper ask one trial of a team over its share to stop at its next epoch end; it resumes
# later from that epoch (experiments/services/preemption.py). Off everywhere by default.
PREEMPT_QUEUES = env_list("TUNEBOARD_PREEMPT_QUEUES", [])
if set(PREEMPT_QUEUES) - {"cpu", "gpu", "tpu"}:
    raise ImproperlyConfigured(f"TUNEBOARD_PREEMPT_QUEUES takes cpu, gpu and tpu, got {','.join(PREEMPT_QUEUES)!r}.")
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
_broker_options: dict = {
    # Longer than the longest trial, so Redis does not redeliver a task still running.
    "visibility_timeout": MAX_TRIAL_SECONDS + 3600,
}
if CELERY_BROKER_URL.startswith("filesystem://"):
    # Kombu's filesystem transport with atomic writes (webapp/filesystem_broker.py): its own
    # can hand a worker an empty message, which stops the worker.
    CELERY_BROKER_TRANSPORT = "webapp.filesystem_broker:Transport"
    _broker_dir = private_dir(VAR_DIR / "broker")
    _broker_options.update(
        data_folder_in=str(_broker_dir),
        data_folder_out=str(_broker_dir),
        control_folder=str(_broker_dir / "control"),
        store_processed=False,
        # The folder is polled (kombu's default: every second); a fifth of a second keeps a
        # queued job's pickup prompt for a few cheap directory listings a second.
        polling_interval=0.2,
    )
elif not CELERY_BROKER_URL.startswith(("redis://", "rediss://", "memory://")):
    raise ImproperlyConfigured(
        "CELERY_BROKER_URL must be redis:// (or filesystem:// embedded), "
        f"got {redact_url(CELERY_BROKER_URL)!r}."
    )
CELERY_BROKER_TRANSPORT_OPTIONS = _broker_options
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_DEFAULT_QUEUE = "cpu"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Used only with `celery worker --autoscale`: on a GPU host with TUNEBOARD_TRIALS_PER_GPU=auto it sizes the pool by
# measured samples/s (workers/host/packing.py); elsewhere it is Celery's own.
CELERY_WORKER_AUTOSCALER = "workers.host.packing:PackingAutoscaler"
CELERY_BEAT_SCHEDULE = {
    "reap-lost-work": {"task": "workers.tasks.reap", "schedule": float(REAPER_INTERVAL_SECONDS)},
    "purge-old-audit-events": {"task": "workers.tasks.purge_audit", "schedule": 3600.0},
    "purge-old-job-logs": {"task": "workers.tasks.purge_job_logs", "schedule": 3600.0},
}

# LOG_FORMAT=json: one JSON object a line (time, level, logger, message, and study_id /
# trial_id / model_id when a log call passes them with `extra=`).
LOG_FORMAT = env_str("LOG_FORMAT", "text").lower()
if LOG_FORMAT not in ("text", "json"):
    raise ImproperlyConfigured(f"LOG_FORMAT must be text or json, got {LOG_FORMAT!r}.")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"json": {"()": "experiments.logformat.JsonFormatter"}},
    "handlers": {"console": {"class": "logging.StreamHandler",
                             **({"formatter": "json"} if LOG_FORMAT == "json" else {})}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}
WHITENOISE_USE_FINDERS = True

# REST API (experiments/api/): personal tokens (knox, stored hashed, named, optional expiry)
# sent as "Authorization: Bearer <token>", or the browser session.
KNOX_TOKEN_MODEL = "experiments.ApiToken"
# knox's and django-auditlog's own migrations create their default tables even though the models
# are swapped for ours; those tables reference users and would block deleting or flushing them.
MIGRATION_MODULES = {"knox": None, "auditlog": None}
REST_KNOX = {"AUTH_HEADER_PREFIX": "Bearer", "TOKEN_TTL": None, "TOKEN_MODEL": KNOX_TOKEN_MODEL}
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "knox.auth.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["experiments.api.auth.TeamMember"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": [
        "experiments.api.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "experiments.api.pagination.Pagination",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "experiments.api.errors.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    # ?format=csv belongs to the leaderboard, not to DRF's renderer switch.
    "URL_FORMAT_OVERRIDE": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Tuneboard API",
    "DESCRIPTION": "KerasTuner studies, trials, models and ensembles of your team. Authenticate with "
                   "`Authorization: Bearer <token>` (tokens: /account/tokens/); a token acts in the one team "
                   "it was made for, the browser session in the team of `X-Tuneboard-Team: <team id>`, else its "
                   "current team.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Choice sets used by more than one component keep the names they had with one: trained
    # models and trial re-runs share a lifecycle, a trial's detail extends the trial.
    "ENUM_NAME_OVERRIDES": {"TrainedModelStatusEnum": "experiments.states.JobStatus",
                            "TrialStatusEnum": "experiments.states.TrialStatus",
                            "DirectionEnum": "experiments.forms.recipes.Direction",
                            "RecipeMethodEnum": "experiments.forms.recipes.RecipeMethod",
                            "RecipeTriggerEnum": "experiments.forms.recipes.RecipeTrigger",
                            "RecipeMembersAsEnum": "experiments.forms.recipes.RecipeMembersAs",
                            "RecipeGroupByEnum": "experiments.forms.recipes.RecipeGroupBy"},
}
