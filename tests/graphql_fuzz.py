"""Schemathesis against a running server: every query and mutation, generated from the
schema's introspection, then its stateful phase (ids produced by mutations fed to the
operations that take them). Used by tests/api/test_schemathesis_fuzz.py (seeded, about a
minute) and by `make fuzz` (bench/fuzz.py: a long run with a random seed).

A response passes when it is not a 5xx, is JSON, and every error in it carries an
``extensions.code`` from the accepted client codes. Client errors are the point of fuzzing
(most generated inputs are invalid), so they are accepted by name, not by disabling checks.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, seed, settings
from hypothesis.stateful import run_state_machine_as_test

# Client errors a fuzzer is expected to provoke. Never INTERNAL_SERVER_ERROR, and never
# SERVICE_UNAVAILABLE: a generated request that exhausts the server is a finding too.
ACCEPTED_CODES = frozenset({"BAD_USER_INPUT", "NOT_FOUND", "FORBIDDEN", "UNAUTHENTICATED"})


@dataclass
class FuzzReport:
    cases: int = 0
    codes: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)

    def check(self, status: int, body: str, where: str) -> None:
        self.cases += 1
        for problem in response_problems(status, body):
            self.problems.append(f"{where}: {problem}")
        try:
            for error in json.loads(body).get("errors") or []:
                self.codes[str((error.get("extensions") or {}).get("code"))] += 1
        except (ValueError, AttributeError):
            pass


def response_problems(status: int, body: str) -> list[str]:
    """What is wrong with one response (nothing, for a valid answer or an accepted error)."""
    if status >= 500:
        return [f"HTTP {status}: {body[:300]}"]
    try:
        payload = json.loads(body)
    except ValueError:
        return [f"not JSON (HTTP {status}): {body[:300]}"]
    if not isinstance(payload, dict):
        return [f"not a GraphQL response: {body[:300]}"]
    problems = []
    for error in payload.get("errors") or []:
        code = (error.get("extensions") or {}).get("code")
        if code is None:
            problems.append(f"error without extensions.code: {error}")
        elif code not in ACCEPTED_CODES:
            problems.append(f"{code}: {error.get('message')}")
    return problems


def fuzz(
    url: str,
    *,
    examples_per_operation: int,
    stateful_examples: int,
    random_seed: int,
    report: FuzzReport | None = None,
) -> FuzzReport:
    """Fuzz every operation, then run the stateful phase; returns what was seen."""
    report = report or FuzzReport()
    schema = schemathesis.graphql.from_url(url)
    quiet = settings(
        max_examples=examples_per_operation,
        deadline=None,
        database=None,  # reproducible from the seed alone, nothing kept between runs
        suppress_health_check=list(HealthCheck),
    )
    for result in schema.get_all_operations():
        operation = result.ok()
        run_operation(operation, quiet, random_seed, report)

    class Checked(schema.as_state_machine()):  # type: ignore[misc]
        def validate_response(self, response: Any, case: Any, *args: Any, **kwargs: Any) -> None:
            report.check(response.status_code, response.text, f"stateful {case.operation.label}")

    if stateful_examples:
        # Hypothesis seeds state machines from the test itself: derandomized, so this phase
        # replays the same way every run.
        run_state_machine_as_test(
            Checked,
            settings=settings(
                max_examples=stateful_examples,
                stateful_step_count=10,
                deadline=None,
                database=None,
                derandomize=True,
                suppress_health_check=list(HealthCheck),
            ),
        )
    return report


def run_operation(operation: Any, quiet: Any, random_seed: int, report: FuzzReport) -> None:
    @seed(random_seed)
    @quiet
    @given(case=operation.as_strategy())
    def one(case: Any) -> None:
        response = case.call(timeout=30)
        report.check(response.status_code, response.text, operation.label)

    one()


def error_lines(log_path: Path) -> list[str]:
    """The server log's ERROR (or worse) lines (JSON log format)."""
    found = []
    for line in log_path.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("level") in ("ERROR", "CRITICAL"):
            found.append(line[:500])
    return found
