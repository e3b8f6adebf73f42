#!/usr/bin/env bash
# Prints the embedded mode's signing key, made once at random into $TUNEBOARD_VAR_DIR/secret_key
# (default ./var) and readable by its owner only: `make run` then needs no configuration, and
# sessions survive a restart. PYTHON: the interpreter that makes it (default .venv/bin/python).
set -euo pipefail
KEY_FILE="${TUNEBOARD_VAR_DIR:-var}/secret_key"
if [ ! -s "$KEY_FILE" ]; then
  mkdir -p "$(dirname "$KEY_FILE")"
  (umask 077 && "${PYTHON:-.venv/bin/python}" -c 'import secrets; print(secrets.token_urlsafe(50))' > "$KEY_FILE.new")
  mv "$KEY_FILE.new" "$KEY_FILE"
fi
cat "$KEY_FILE"
