#!/usr/bin/env bash
# The embedded mode: the web server plus a real Celery worker (with beat) on SQLite,
# Celery's filesystem transport and a local artifact folder. Ctrl-C stops both.
# It migrates and seeds the demo first. DEBUG stays off, as in production (no tracebacks or
# settings shown to whoever reaches the port), so it needs a signing key: SECRET_KEY if set,
# else one made once at random in var/secret_key.
set -euo pipefail
PORT="${PORT:-8000}"
mkdir -p var
SECRET_KEY="${SECRET_KEY:-$(bash scripts/embedded_secret_key.sh)}"
export SECRET_KEY
.venv/bin/python manage.py migrate --noinput
.venv/bin/python manage.py seed_demo --i-know-this-is-not-production
# Trial slots: TUNEBOARD_EMBEDDED_SLOTS, else half the CPUs (2 to 4); see webapp/embedded.py.
read -r SLOTS THREADS < <(.venv/bin/python -m webapp.embedded)
export TUNEBOARD_TF_THREADS="${TUNEBOARD_TF_THREADS:-$THREADS}"
.venv/bin/celery -A webapp worker -B -Q cpu --concurrency "$SLOTS" --loglevel INFO \
  --schedule var/celerybeat-schedule --hostname "embedded@%h" > var/worker.log 2>&1 &
WORKER=$!
trap 'kill $WORKER 2>/dev/null; wait $WORKER 2>/dev/null' EXIT INT TERM
cat <<MSG

  Tuneboard is starting at  http://127.0.0.1:$PORT/
  Log in as                 demo / tuneboard-demo
  Worker                    $SLOTS trial slots (TUNEBOARD_EMBEDDED_SLOTS), log in var/worker.log
                            (Ctrl-C stops web and worker)

MSG
.venv/bin/python manage.py runserver "127.0.0.1:$PORT" --noreload
