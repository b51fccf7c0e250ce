"""Schemathesis fuzzes every query and mutation of a real `gql-memory serve` (seeded, so CI
replays the same requests), then runs its stateful phase: no 5xx, no error without a code, no
code but the accepted client ones, and no ERROR line in the server's log. `make fuzz` runs the
same for longer with a random seed (bench/fuzz.py)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import private_temp_dir
from tests.graphql_fuzz import error_lines, fuzz
from tests.processes import ServeProcess

SEED = 20261123
EXAMPLES_PER_OPERATION = 30
STATEFUL_EXAMPLES = 20


@pytest.fixture(scope="module")
def fuzzed_server() -> Iterator[ServeProcess]:
    root = private_temp_dir()
    server = ServeProcess(root / "data").start()
    yield server
    server.stop()
    shutil.rmtree(root, ignore_errors=True)


def test_schemathesis_finds_no_internal_error(fuzzed_server: ServeProcess) -> None:
    report = fuzz(
        f"{fuzzed_server.base_url}/graphql",
        examples_per_operation=EXAMPLES_PER_OPERATION,
        stateful_examples=STATEFUL_EXAMPLES,
        random_seed=SEED,
    )
    assert not report.problems, report.problems[:10]
    assert report.cases > 33 * 10  # every operation was exercised
    assert report.codes["BAD_USER_INPUT"] > 0  # the fuzzer did reach the validation
    assert fuzzed_server.log_path is not None
    assert not error_lines(Path(fuzzed_server.log_path)), error_lines(fuzzed_server.log_path)[:5]
