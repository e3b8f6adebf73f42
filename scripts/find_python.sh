#!/usr/bin/env bash
# Which Python the Makefile builds .venv with.
#
#   find_python.sh              print PYTHON if it is set (refused unless supported), otherwise
#                               the first supported one of python3.11, python3.12, python3.13,
#                               python3 on PATH; when there is none, say what to install, exit 1
#   find_python.sh --venv DIR   exit 0 if DIR/bin/python still runs, is supported and, when
#                               PYTHON is set, is the same version as PYTHON; else say why, exit 1
#
# Every candidate is asked its version: a name on PATH proves nothing (pyenv puts shims there
# for versions that are installed but not selected, and they fail when run).
set -uo pipefail

# The versions TensorFlow, Django and every pin in pyproject.toml install on; requires-python
# and the Dockerfile's base image must agree (tests/unit/test_python_selection.py checks).
SUPPORTED="3.11 3.12 3.13"
CANDIDATES="python3.11 python3.12 python3.13 python3"
NEEDS="Tuneboard needs Python 3.11, 3.12 or 3.13"

# "3.12" for an interpreter that runs, nothing otherwise.
version_of() {
  "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null | head -n 1
}

supported() {
  [ -n "$1" ] && case " $SUPPORTED " in *" $1 "*) true ;; *) false ;; esac
}

if [ "${1:-}" = "--venv" ]; then
  venv="${2:?usage: find_python.sh --venv DIR}"
  have="$(version_of "$venv/bin/python")"
  if [ -z "$have" ]; then
    echo "$venv/bin/python no longer runs" >&2; exit 1
  elif ! supported "$have"; then
    echo "$venv was made by Python $have, which is not supported. $NEEDS" >&2; exit 1
  elif [ -n "${PYTHON:-}" ] && [ "$(version_of "$PYTHON")" != "$have" ]; then
    echo "$venv was made by Python $have, not by PYTHON=$PYTHON" >&2; exit 1
  fi
  exit 0
fi

if [ -n "${PYTHON:-}" ]; then
  version="$(version_of "$PYTHON")"
  if [ -z "$version" ]; then
    echo "PYTHON=$PYTHON does not run as a Python interpreter. $NEEDS: set PYTHON to one of them, or unset it to let make pick one." >&2
    exit 1
  elif ! supported "$version"; then
    echo "PYTHON=$PYTHON is Python $version. $NEEDS: set PYTHON to one of them, or unset it to let make pick one." >&2
    exit 1
  fi
  echo "$PYTHON"
  exit 0
fi

for name in $CANDIDATES; do
  path="$(command -v "$name" 2>/dev/null)" || continue
  if supported "$(version_of "$path")"; then
    echo "$path"
    exit 0
  fi
done

cat >&2 <<EOF
$NEEDS; none found on PATH (tried $CANDIDATES).
Install one, e.g. apt-get install python3.11 or pyenv install 3.12,
or run make PYTHON=/path/to/python3.12 test
EOF
exit 1
