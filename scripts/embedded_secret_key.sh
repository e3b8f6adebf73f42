#!/usr/bin/env bash
# Prints the embedded mode's signing key, made once at random into $TUNEBOARD_VAR_DIR/secret_key
# (default ./var) and readable by its owner only: `make run` then needs no configuration, and
# sessions survive a restart. The settings read (or make) the same file whenever the embedded
# defaults apply (webapp/env.py), so `manage.py` commands in this checkout need no SECRET_KEY.
# PYTHON: the interpreter that makes it (default .venv/bin/python). Run from the checkout's root.
set -euo pipefail
"${PYTHON:-.venv/bin/python}" -c 'import sys
from pathlib import Path
from webapp.env import embedded_secret_key
print(embedded_secret_key(Path(sys.argv[1])))' "${TUNEBOARD_VAR_DIR:-var}/secret_key"
