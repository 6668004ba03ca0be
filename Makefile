# One command each, from a fresh clone: `make check` (offline check of dev) and `make test`.
# Both create .venv with the pinned dependencies first; nothing else needs installing.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
STAMP := $(VENV)/.installed
STACK ?= dev

.PHONY: venv check test bench clean

$(STAMP): requirements.txt policies/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --disable-pip-version-check --quiet -r requirements.txt
	touch $(STAMP)

venv: $(STAMP)

check: $(STAMP)
	$(VENV)/bin/python -m automation check --stack $(STACK)

test: $(STAMP)
	$(VENV)/bin/python -m pytest -n auto

# The benchmark's own environment: checkov (the yardstick) and matplotlib, pinned apart from .venv.
BENCH_VENV := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed

$(BENCH_STAMP): benchmarks/requirements.txt
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --disable-pip-version-check --quiet -r benchmarks/requirements.txt
	touch $(BENCH_STAMP)

bench: $(STAMP) $(BENCH_STAMP)
	$(VENV)/bin/python benchmarks/bench_check.py
	$(VENV)/bin/python benchmarks/bench_recording.py
	$(VENV)/bin/python benchmarks/bench_policies.py build/bench/prod/plan.json

clean:
	rm -rf build .pytest_cache
