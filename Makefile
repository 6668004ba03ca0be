# One command each, from a fresh clone: `make check` (offline check of dev) and `make test`.
# Both create .venv with the pinned dependencies first; nothing else needs installing.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
STAMP := $(VENV)/.installed
STACK ?= dev
GATEWAY_VENV := .venv-gateway
GATEWAY_STAMP := $(GATEWAY_VENV)/.installed

.PHONY: venv gateway-venv check typecheck test bench mutation clean settings-doc

$(STAMP): requirements.txt policies/requirements.txt tests/requirements-helm.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --disable-pip-version-check --quiet -r requirements.txt
	touch $(STAMP)

venv: $(STAMP)

# The real LiteLLM proxy for the gateway tests, apart from the program's pins (see requirements-gateway.txt).
$(GATEWAY_STAMP): requirements-gateway.txt
	$(PYTHON) -m venv $(GATEWAY_VENV)
	$(GATEWAY_VENV)/bin/python -m pip install --disable-pip-version-check --quiet --no-deps -r requirements-gateway.txt
	touch $(GATEWAY_STAMP)

gateway-venv: $(GATEWAY_STAMP)

check: $(STAMP)
	$(VENV)/bin/python -m automation check --stack $(STACK)

# docs/settings.md and README's settings table, regenerated from the settings models' field descriptions
# (`settings-doc check`, run by the tests, fails while either is stale).
settings-doc: $(STAMP)
	$(VENV)/bin/python -m automation settings-doc write

# mypy (pyproject.toml [tool.mypy]) twice: the program (its `files`), then the policy pack, whose
# modules import each other as the pack runs them (policies/ first on sys.path: `capacity`, `lib`,
# `checks`), while the program imports policies/capacity as `policies.capacity`; one mypy run can
# give a file one module name only.
typecheck: $(STAMP)
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy policies

# One worker more than cores: many tests wait on subprocesses (the Pulumi CLI and kubectl stand-ins,
# Prometheus scrapes, the LiteLLM proxy), and the extra worker uses that idle CPU (2 cores: 110 s
# against 125 s with 2 workers and 117 s with 4). worksteal: an idle worker takes queued tests from
# a busy one, so no core idles at the end.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
# Outside CI a failed gateway venv only skips the real-gateway tests (they print why); in CI it fails.
test: $(STAMP)
	$(MAKE) gateway-venv || [ -z "$$CI" ]
	$(VENV)/bin/ruff check .
	$(MAKE) typecheck
	$(VENV)/bin/python -m pytest -n $(TEST_WORKERS) --dist worksteal

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
	$(VENV)/bin/python benchmarks/bench_capacity.py

# Mutation testing of the decision code (pyproject.toml [tool.cosmic-ray], tests/mutation/run.py):
# cosmic-ray in its own .venv-mutation, the mutants' tests in .venv. Not part of `make test`.
# `make mutation MODULE=policies/lib/pools.py` runs one module or file; SAMPLE=0 every mutant.
MUTATION_VENV := .venv-mutation
MUTATION_STAMP := $(MUTATION_VENV)/.installed
MODULE ?=
SAMPLE ?=

$(MUTATION_STAMP): requirements-mutation.txt
	$(PYTHON) -m venv $(MUTATION_VENV)
	$(MUTATION_VENV)/bin/python -m pip install --disable-pip-version-check --quiet -r requirements-mutation.txt
	touch $(MUTATION_STAMP)

mutation: $(STAMP) $(MUTATION_STAMP)
	$(MUTATION_VENV)/bin/python tests/mutation/run.py --python $(VENV)/bin/python --jobs $$(nproc 2>/dev/null || echo 1) \
		$(if $(MODULE),--module $(MODULE)) $(if $(SAMPLE),--sample $(SAMPLE))

clean:
	rm -rf build .pytest_cache .mypy_cache
