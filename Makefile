# The two commands of the quick start: `make serve` and `make test`.
# Both create the virtual environment and install the package on first use.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Two installs: `serve` needs the runtime dependencies only; the tests and gates add the
# extras below (pytest, ruff, mypy, selenium ...). Each has its stamp, renewed when
# pyproject.toml changes.
RUNTIME_STAMP := $(VENV)/.runtime-stamp
DEV_STAMP     := $(VENV)/.dev-stamp
TEST_EXTRAS   := dev

.PHONY: install install-dev serve test check lint format schema bench fuzz clean

$(RUNTIME_STAMP): pyproject.toml
	@echo "installing gql-memory and its runtime dependencies into $(VENV) (the first time: about a minute)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --progress-bar on -e .
	@touch $@

$(DEV_STAMP): $(RUNTIME_STAMP) pyproject.toml
	@echo "installing the test and development tools into $(VENV) (the first time: about 2 minutes)"
	$(BIN)/python -m pip install --progress-bar on -e '.[$(TEST_EXTRAS)]'
	@touch $@

install: $(RUNTIME_STAMP)

install-dev: $(DEV_STAMP)

## Start embedded PostgreSQL (or use DATABASE_URL), migrate, serve GraphiQL on :8000.
serve: install
	$(BIN)/gql-memory serve

## Run the whole test suite against a real (embedded) PostgreSQL. Two pytest-xdist workers
## (one on a single core), each with its own embedded PostgreSQL; a file's tests stay together
## on one worker (--dist loadfile: module-scoped databases and servers are set up once).
test: install-dev
	$(BIN)/python -m pytest -n auto --maxprocesses 2 --dist loadfile

## The gates CI runs before the tests: ruff (lint and format), mypy, the import layers
## (CONTRIBUTING.md). `make format` fixes what ruff can.
check: install-dev
	$(BIN)/ruff check gql_memory tests bench migrations
	$(BIN)/ruff format --check gql_memory tests bench migrations
	$(BIN)/mypy
	$(BIN)/lint-imports

lint: check

format: install-dev
	$(BIN)/ruff format gql_memory tests bench migrations
	$(BIN)/ruff check --fix gql_memory tests bench migrations

## Rewrite schema.graphql from the code.
schema: install
	$(BIN)/gql-memory export-schema --output schema.graphql

## Run the benchmarks (results are written to docs/benchmarks.md).
bench: install-dev
	$(BIN)/python -m bench

## Fuzz every query and mutation for long (>= 50,000 requests, random seed); results in
## docs/benchmarks-security.md. Pass ARGS="--seed N" to replay a run.
fuzz: install-dev
	$(BIN)/python -m bench.fuzz $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build *.egg-info
