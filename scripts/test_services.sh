#!/usr/bin/env bash
# Make sure a PostgreSQL and a Redis answer on localhost for the test suite, and print the
# environment the tests use. Running ones are used as they are; otherwise private ones are
# started (and packages installed with apt-get when missing). Progress goes to stderr.
set -euo pipefail
say() { echo "test-services: $*" >&2; }
# apt's progress is long; keep it in a log and show it only when the install fails.
install() {
  local log; log="$(mktemp)"
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"; } >"$log" 2>&1; then
    cat "$log" >&2; say "installing $* failed"; exit 1
  fi
  rm -f "$log"
}

PG_PORT=5432
pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }
pg_ready() { local bin; bin="$(pg_bin)"; "${bin:-/usr/bin}/pg_isready" -q -h 127.0.0.1 -p "$1" 2>/dev/null; }

if pg_ready 5432; then
  say "using PostgreSQL on 127.0.0.1:5432"
else
  PG_PORT=55432
  if ! pg_ready "$PG_PORT"; then
    if [ -z "$(pg_bin)" ]; then
      say "installing PostgreSQL"; install postgresql
    fi
    BIN="$(pg_bin)"; DATA=/tmp/tuneboard-test-pg
    # PostgreSQL refuses to run as root: the cluster belongs to the postgres user.
    RUN=(); if [ "$(id -u)" = 0 ]; then id postgres >/dev/null 2>&1 || useradd -r postgres; RUN=(runuser -u postgres --); fi
    if [ ! -f "$DATA/PG_VERSION" ]; then
      mkdir -p "$DATA"; [ "$(id -u)" = 0 ] && chown postgres "$DATA"
      "${RUN[@]}" "$BIN/initdb" -D "$DATA" -U postgres --auth=trust >/dev/null
    fi
    say "starting a private PostgreSQL on 127.0.0.1:$PG_PORT"
    "${RUN[@]}" "$BIN/pg_ctl" -D "$DATA" -l "$DATA/log" -w \
      -o "-p $PG_PORT -k /tmp -c listen_addresses=127.0.0.1 -c fsync=off" start >&2
  fi
fi

REDIS_PORT=6379
# The fault-tolerance tests start Redis servers of their own (tests/integration/restarts.py),
# so the binary is needed even where a Redis already answers.
if ! command -v redis-server >/dev/null; then
  say "installing Redis"; install redis-server
fi
if redis-cli -p 6379 ping >/dev/null 2>&1; then
  say "using Redis on 127.0.0.1:6379"
else
  say "starting Redis on 127.0.0.1:6379"
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >&2
  for _ in $(seq 50); do redis-cli -p 6379 ping >/dev/null 2>&1 && break; sleep 0.1; done
fi

if [ ! -x /usr/bin/chromium ]; then
  say "installing Chromium for the browser tests"
  install chromium
fi

# make test's parallel phase gives each pytest process a database of its own: PostgreSQL's
# test_tuneboard_gw0, _gw1, ... (pytest-django) and this Redis database and the ones below it
# (gw0 15, gw1 14, ...: tests/parallel.py).
echo "DATABASE_URL=postgres://postgres@127.0.0.1:$PG_PORT/tuneboard"
echo "CELERY_BROKER_URL=redis://127.0.0.1:$REDIS_PORT/${TUNEBOARD_TEST_REDIS_DB:-15}"
