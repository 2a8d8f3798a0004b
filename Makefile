# cudabox — two commands on a fresh machine: `make demo` and `make test`.
# Both create the venv under .venv/ (git-ignored) and install what they need.

SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: venv test test-fast demo services check bench clean

$(STAMP): pyproject.toml
	@scripts/bootstrap-venv.sh "$(PYTHON)" "$(VENV)"
	@touch $(STAMP)

venv: $(STAMP)

## services: start what the integration tests need (Docker engine, base image, Slurm)
services:
	@scripts/start-services.sh

## check: the data and generated-file checks CI runs
check: venv
	$(BIN)/cudabox matrix check
	$(BIN)/cudabox images check
	$(BIN)/cudabox ci check

## test: the whole suite, Docker and Slurm included (CI runs this via .ci/run)
test: venv services check
	CUDABOX_REQUIRE_SERVICES=1 $(BIN)/python -m pytest -q

## test-fast: pure-logic tests only (no engine needed)
test-fast: venv
	$(BIN)/python -m pytest -q -m "not docker and not slurm and not network"

## demo: the main job on the bundled example
demo: venv
	@scripts/demo.sh

## bench: print measured figures (build/run need the engine: `make services` first)
bench: venv
	@for b in bench/startup.py bench/matrix_load.py bench/resolve.py bench/build.py bench/lock_build.py bench/run_overhead.py; do \
		$(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache tests/.artifacts
