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
WORKERS=$!
# JAX studies go to the cpu-jax queue, which a TensorFlow worker must not serve (docs/how-to/gpus-and-tpus.md):
# where JAX is installed (make run installs it), a one-slot JAX worker serves it beside the other.
# TUNEBOARD_EMBEDDED_JAX=0 leaves it out.
JAX_WORKER="none (JAX not installed, or TUNEBOARD_EMBEDDED_JAX=0)"
if [ "${TUNEBOARD_EMBEDDED_JAX:-1}" != "0" ] && .venv/bin/python -c 'import importlib.util as u, sys; sys.exit(u.find_spec("jax") is None)'; then
  KERAS_BACKEND=jax .venv/bin/celery -A webapp worker -Q cpu-jax --concurrency 1 --loglevel INFO \
    --hostname "embedded-jax@%h" > var/worker-jax.log 2>&1 &
  WORKERS="$WORKERS $!"
  JAX_WORKER="1 slot on cpu-jax for JAX studies, log in var/worker-jax.log"
fi
trap 'kill $WORKERS 2>/dev/null; wait $WORKERS 2>/dev/null' EXIT INT TERM
cat <<MSG

  Tuneboard is starting at  http://127.0.0.1:$PORT/
  Log in as                 demo / tuneboard-demo
  Worker                    $SLOTS trial slots (TUNEBOARD_EMBEDDED_SLOTS), log in var/worker.log
  JAX worker                $JAX_WORKER
                            (Ctrl-C stops web and workers)

MSG
.venv/bin/python manage.py runserver "127.0.0.1:$PORT" --noreload
