# The two commands of the README. Each bootstraps what it needs.
PYTHON ?= python3.11
VENV := .venv

.PHONY: run test bench lint

$(VENV)/.installed: pyproject.toml client/pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e ".[test]" -e ./client
	touch $@

run: $(VENV)/.installed
	TF_CPP_MIN_LOG_LEVEL=2 bash scripts/run_embedded.sh

test: $(VENV)/.installed
	mkdir -p var
	bash scripts/test_services.sh > var/test-services.env
	set -a; . ./var/test-services.env; set +a; \
	  TF_CPP_MIN_LOG_LEVEL=2 TUNEBOARD_VAR_DIR=$(CURDIR)/var/test $(VENV)/bin/pytest $(PYTEST_ARGS)

bench: $(VENV)/.installed
	bash scripts/test_services.sh > var/test-services.env
	set -a; . ./var/test-services.env; set +a; $(VENV)/bin/python -m benchmarks.orchestration && \
	  $(VENV)/bin/python -m benchmarks.downloads && $(VENV)/bin/python -m benchmarks.ensembles && \
	  $(VENV)/bin/python -m benchmarks.pages && $(VENV)/bin/python -m benchmarks.api && $(VENV)/bin/python -m benchmarks.training && \
	  $(VENV)/bin/python -m benchmarks.uploads

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
