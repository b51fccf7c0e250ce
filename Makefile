# The two commands of the quick start: `make serve` and `make test`.
# Both create the virtual environment and install the package on first use.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: install serve test check lint format schema bench fuzz clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

## Start embedded PostgreSQL (or use DATABASE_URL), migrate, serve GraphiQL on :8000.
serve: install
	$(BIN)/gql-memory serve

## Run the whole test suite against a real (embedded) PostgreSQL. Two pytest-xdist workers
## (one on a single core), each with its own embedded PostgreSQL; a file's tests stay together
## on one worker (--dist loadfile: module-scoped databases and servers are set up once).
test: install
	$(BIN)/python -m pytest -n auto --maxprocesses 2 --dist loadfile

## The gates CI runs before the tests: ruff (lint and format), mypy, the import layers
## (CONTRIBUTING.md). `make format` fixes what ruff can.
check: install
	$(BIN)/ruff check gql_memory tests bench migrations
	$(BIN)/ruff format --check gql_memory tests bench migrations
	$(BIN)/mypy
	$(BIN)/lint-imports

lint: check

format: install
	$(BIN)/ruff format gql_memory tests bench migrations
	$(BIN)/ruff check --fix gql_memory tests bench migrations

## Rewrite schema.graphql from the code.
schema: install
	$(BIN)/gql-memory export-schema --output schema.graphql

## Run the benchmarks (results are written to docs/benchmarks.md).
bench: install
	$(BIN)/python -m bench

## Fuzz every query and mutation for long (>= 50,000 requests, random seed); results in
## docs/benchmarks-security.md. Pass ARGS="--seed N" to replay a run.
fuzz: install
	$(BIN)/python -m bench.fuzz $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build *.egg-info
