# The two commands of the README. Each bootstraps what it needs.
# PYTHON=/path/to/python3.x picks the interpreter for .venv; by default scripts/find_python.sh
# takes the first supported one on PATH (3.11, 3.12 or 3.13).
VENV := .venv

# A .venv from an unsupported, vanished or (with PYTHON=) other interpreter is made again, even
# when .installed looks up to date. bin/python is a symlink: -L still sees it dangling.
HAS_VENV = { [ -e $(VENV)/bin/python ] || [ -L $(VENV)/bin/python ]; }
FIND_PYTHON = PYTHON='$(PYTHON)' bash scripts/find_python.sh
VENV_STALE := $(shell $(HAS_VENV) && ! $(FIND_PYTHON) --venv $(VENV) 2>/dev/null && echo yes)

.PHONY: run test bench lint docs docs-images FORCE

# The replacement interpreter is found before the old .venv is removed, so a refusal changes nothing.
# .[test] pulls in both Keras backends (the tensorflow and jax extras): make test runs both, and
# make run starts a TensorFlow worker and a JAX one beside it (docs/how-to/gpus-and-tpus.md).
$(VENV)/.installed: pyproject.toml client/pyproject.toml $(if $(VENV_STALE),FORCE)
	@if $(HAS_VENV) && ! $(FIND_PYTHON) --venv $(VENV); then \
	  python="$$($(FIND_PYTHON))" && echo "removing $(VENV) to make it again with $$python" && rm -rf $(VENV); fi
	@test -x $(VENV)/bin/python || { python="$$($(FIND_PYTHON))" && \
	  echo "creating $(VENV) with $$python" && "$$python" -m venv $(VENV); }
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e ".[test]" -e ./client
	touch $@

run: $(VENV)/.installed
	TF_CPP_MIN_LOG_LEVEL=2 bash scripts/run_embedded.sh

# Three phases: TEST_PROCESSES pytest processes share the tests (the integration and browser
# tests mostly wait on workers, PostgreSQL and Redis); then the @serial tests (bounds in seconds, a
# memory ceiling) two at a time, away from that crowd; then the @alone ones (they stop the shared
# PostgreSQL, load every core or hold an ETA to the load) one at a time. PYTEST_ARGS goes to every phase (a file, -k, -m
# select within each); a phase left with no test (exit 5) is not a failure unless all are. Exit 2
# (interrupted, or tests that do not collect) stops there. worksteal: a process that runs out of
# tests takes half of another's. The serial phase hands its few tests out one at a time, the
# long ones first (tests/parallel.py), so neither process is left with two long ones at the end.
# --durations names the 25 slowest tests of the parallel phase (where the time goes, for whoever trims it).
# Bytecode is written even where PYTHONDONTWRITEBYTECODE is set: the suite starts hundreds of
# Python processes (workers, servers, commands) that would each compile the project again, and
# each pytest process would rewrite the tests' asserts again (12 s instead of 5.5 s a process).
TEST_PROCESSES ?= 4
PYTEST = $(VENV)/bin/pytest
ONE_AT_A_TIME = --dist load --maxschedchunk 1
test: $(VENV)/.installed
	mkdir -p var
	bash scripts/test_services.sh > var/test-services.env
	set -a; . ./var/test-services.env; set +a; export TF_CPP_MIN_LOG_LEVEL=2 TUNEBOARD_VAR_DIR=$(CURDIR)/var/test; \
	  unset PYTHONDONTWRITEBYTECODE; \
	  $(PYTEST) -n $(TEST_PROCESSES) --dist worksteal --phase parallel --durations=25 $(PYTEST_ARGS); parallel=$$?; \
	  [ $$parallel = 2 ] && exit 2; \
	  $(PYTEST) -n 2 $(ONE_AT_A_TIME) --phase serial $(PYTEST_ARGS); serial=$$?; \
	  [ $$serial = 2 ] && exit 2; \
	  $(PYTEST) -n 0 --phase alone $(PYTEST_ARGS); alone=$$?; \
	  for code in $$parallel $$serial $$alone; do case $$code in 0|5) ;; *) failed=yes;; esac; done; \
	  if [ -n "$$failed" ] || [ "$$parallel$$serial$$alone" = 555 ]; then \
	    echo "make test: phase exits: parallel $$parallel, serial $$serial, alone $$alone" >&2; exit 1; fi

bench: $(VENV)/.installed
	bash scripts/test_services.sh > var/test-services.env
	set -a; . ./var/test-services.env; set +a; $(VENV)/bin/python -m benchmarks.orchestration && \
	  $(VENV)/bin/python -m benchmarks.downloads && $(VENV)/bin/python -m benchmarks.ensembles && \
	  $(VENV)/bin/python -m benchmarks.pages && $(VENV)/bin/python -m benchmarks.api && $(VENV)/bin/python -m benchmarks.training && \
	  $(VENV)/bin/python -m benchmarks.metrics_overhead && $(VENV)/bin/python -m benchmarks.pruning && \
	  $(VENV)/bin/python -m benchmarks.uploads && \
	  $(VENV)/bin/python -m benchmarks.search_quality && $(VENV)/bin/python -m benchmarks.predict

# The documentation site into var/site (offline), strict: a broken link, anchor or picture fails it.
# The API page renders the schema the code serves, written first.
docs: $(VENV)/.installed
	env -u DATABASE_URL -u CELERY_BROKER_URL $(VENV)/bin/python manage.py spectacular --file docs/reference/openapi.yaml
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The pictures the docs embed, taken by the getting-started journey's browser test against a real
# worker (PostgreSQL and Redis as make test finds or starts them); commit what changed.
docs-images: $(VENV)/.installed
	mkdir -p var
	bash scripts/test_services.sh > var/test-services.env
	set -a; . ./var/test-services.env; set +a; export TF_CPP_MIN_LOG_LEVEL=2 TUNEBOARD_VAR_DIR=$(CURDIR)/var/test \
	  TUNEBOARD_DOCS_IMAGES=$(CURDIR)/docs/images; $(PYTEST) -p no:xdist tests/browser/test_study_journey.py

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .

FORCE:
