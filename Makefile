# One command sets up and runs the main job; one sets up and passes the tests.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SHARED := $(abspath ../shared)
STAMP := $(VENV)/.installed
export NPA_HOME ?= $(CURDIR)/.npa-demo
# The real-SkyPilot tests bootstrap once into this cache and reuse it while it passes the gate.
export NPA_TEST_SKYPILOT_CACHE ?= $(CURDIR)/.cache/skypilot-venv

ifneq ($(wildcard $(SHARED)/spec-corpus),)
export NPA_SPEC_CORPUS ?= $(SHARED)/spec-corpus
endif
ifneq ($(wildcard $(SHARED)/design/tool-catalog.json),)
export NPA_TOOL_CATALOG ?= $(SHARED)/design/tool-catalog.json
endif

.PHONY: demo test lint bench clean kubectl registry-tools sky-tools graph-tools ns-tools

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]' --config-settings editable_mode=compat
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/npa workbench workflow submit workflows/main/sim2real.yaml --plan-only --no-preflight-images

lint: $(STAMP)
	$(BIN)/ruff format --check npa_infra preflight tests bench
	$(BIN)/ruff check npa_infra preflight tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

# The Kubernetes API double's tests also drive kubectl (kubernetes.md §10); Debian ships it
# as kubernetes-client, so a fresh machine gets it here.
kubectl:
	@command -v kubectl >/dev/null || (apt-get update && apt-get install -y kubernetes-client)

# The image-preflight tests run a real registry on loopback (registry.md §5.1): Debian's
# docker-registry (CNCF distribution 2.8.2), htpasswd from apache2-utils, and openssl.
registry-tools:
	@(command -v docker-registry && command -v htpasswd) >/dev/null || (apt-get update && apt-get install -y docker-registry apache2-utils openssl)

# The real SkyPilot 0.12.2 disables Kubernetes without socat and nc and refuses to provision
# without rsync; its `sky check kubernetes` test against the Kubernetes double needs them.
sky-tools:
	@(command -v socat && command -v nc && command -v rsync) >/dev/null || (apt-get update && apt-get install -y socat netcat-openbsd rsync)

# The real-SkyPilot tests run each API server in a private network and PID namespace
# (tests/support/privatehost.py): unshare and nsenter from util-linux, ip from iproute2.
ns-tools:
	@(command -v unshare && command -v nsenter && command -v ip) >/dev/null || (apt-get update && apt-get install -y util-linux iproute2)

# Graphviz's dot lays out every `plan-spec --format dot` drawing in tests/unit/plan/test_graph.py.
graph-tools:
	@command -v dot >/dev/null || (apt-get update && apt-get install -y graphviz)

test: lint kubectl registry-tools sky-tools graph-tools ns-tools
	$(BIN)/python -m pytest

# The benchmark compares against `sky --help` of the bootstrapped SkyPilot when one exists
# (the real-SkyPilot tests leave one in the cache). bench/staging.py then times source
# staging of a 10,000-file tree against moto on loopback (a few minutes: see BENCHMARKS.md),
# bench/preflight_bench.py image preflight, 20 images against 1, over a 50 ms link, and
# bench/wave_cost.py the happy-path cost of one runtime wave against the simulator, and
# bench/spec_growth.py how validate and plan grow from 500 to 5,000 states.
# A missed target of bench/run.py prints FAIL (exit 1) without stopping the others.
bench: $(STAMP) registry-tools kubectl
	if [ -z "$${NPA_SKYPILOT_BIN:-}" ] && [ -x "$(NPA_TEST_SKYPILOT_CACHE)/bin/sky" ]; then \
	  export NPA_SKYPILOT_BIN="$(NPA_TEST_SKYPILOT_CACHE)/bin/sky"; fi; \
	$(BIN)/python bench/run.py --markdown --json bench/results/run.json || echo "bench/run.py exited $$?: a target was missed (FAIL above)"
	$(BIN)/python bench/staging.py --json bench/results/staging.json
	$(BIN)/python bench/preflight_bench.py --runs 15 --json bench/results/preflight.json
	$(BIN)/python bench/wave_cost.py --waves 1 3 12 40 --json bench/results/wave_cost.json
	$(BIN)/python bench/spec_growth.py --json bench/results/spec_growth.json

clean:
	rm -rf $(VENV) .npa-demo build .pytest_cache .mypy_cache .ruff_cache .hypothesis
