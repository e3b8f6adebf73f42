# The two commands of the README. Each bootstraps what it needs.
# PYTHON=/path/to/python3.x picks the interpreter for .venv; by default scripts/find_python.sh
# takes the first supported one on PATH (3.11, 3.12 or 3.13).
VENV := .venv

# A .venv from an unsupported, vanished or (with PYTHON=) other interpreter is made again, even
# when .installed looks up to date. bin/python is a symlink: -L still sees it dangling.
HAS_VENV = { [ -e $(VENV)/bin/python ] || [ -L $(VENV)/bin/python ]; }
FIND_PYTHON = PYTHON='$(PYTHON)' bash scripts/find_python.sh
VENV_STALE := $(shell $(HAS_VENV) && ! $(FIND_PYTHON) --venv $(VENV) 2>/dev/null && echo yes)

.PHONY: run test bench lint FORCE

# The replacement interpreter is found before the old .venv is removed, so a refusal changes nothing.
# .[test] pulls in both Keras backends (the tensorflow and jax extras): make test runs both, and
# make run starts a TensorFlow worker and a JAX one beside it (README, Compute).
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

# Two phases: TEST_PROCESSES pytest processes share the tests (the integration and browser tests
# mostly wait on workers, PostgreSQL and Redis), then the tests marked serial run alone (they
# restart the shared PostgreSQL or Redis, or measure time or memory). PYTEST_ARGS goes to both
# (a file, -k, -m select within each); a phase left with no test (exit 5) is not a failure unless
# both are. Exit 2 (interrupted, or tests that do not collect) skips the serial phase. worksteal:
# a process that runs out of tests takes half of another's, so no long test waits in one's queue.
TEST_PROCESSES ?= 4
test: $(VENV)/.installed
	mkdir -p var
	bash scripts/test_services.sh > var/test-services.env
	set -a; . ./var/test-services.env; set +a; export TF_CPP_MIN_LOG_LEVEL=2 TUNEBOARD_VAR_DIR=$(CURDIR)/var/test; \
	  $(VENV)/bin/pytest -n $(TEST_PROCESSES) --dist worksteal --phase parallel $(PYTEST_ARGS); parallel=$$?; \
	  [ $$parallel = 2 ] && exit 2; \
	  $(VENV)/bin/pytest --phase serial $(PYTEST_ARGS) -n 0; serial=$$?; \
	  case "$$parallel,$$serial" in 0,0|0,5|5,0) ;; \
	    *) echo "make test: parallel phase exit $$parallel, serial phase exit $$serial" >&2; exit 1;; esac

bench: $(VENV)/.installed
	bash scripts/test_services.sh > var/test-services.env
	set -a; . ./var/test-services.env; set +a; $(VENV)/bin/python -m benchmarks.orchestration && \
	  $(VENV)/bin/python -m benchmarks.downloads && $(VENV)/bin/python -m benchmarks.ensembles && \
	  $(VENV)/bin/python -m benchmarks.pages && $(VENV)/bin/python -m benchmarks.api && $(VENV)/bin/python -m benchmarks.training && \
	  $(VENV)/bin/python -m benchmarks.metrics_overhead && $(VENV)/bin/python -m benchmarks.pruning && \
	  $(VENV)/bin/python -m benchmarks.uploads && \
	  $(VENV)/bin/python -m benchmarks.search_quality && $(VENV)/bin/python -m benchmarks.predict

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .

FORCE:
