"""Ingestion latency of the extraction pipeline (issue 5): p50/p95 for 1 KB, 50 KB and 1 MB.

Runs ``store.extraction.ingest`` through the library against an embedded PostgreSQL in a
temporary directory, for each default rule's tool (Read/firstLast500, Grep/matchCountSummary,
Bash/stdoutSummary), with a few synthetic secrets in every output so the redaction gate has
work to do. Also times the in-process part alone (match + summarize + redact, no database).
Writes docs/benchmarks-extraction.md. Bounded: well under a minute.

    .venv/bin/python bench/bench_extraction.py
"""

from __future__ import annotations

import asyncio
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from gql_memory import AsyncMemoryStore
from gql_memory.config import Settings
from gql_memory.memory.extraction.redaction import redact
from gql_memory.memory.extraction.rules import first_match, rules_for
from gql_memory.memory.extraction.summarizers import summarize

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "docs" / "benchmarks-extraction.md"
# (label, characters, ingests per tool): fewer runs for larger outputs keep the total short.
SIZES = [("1 KB", 1024, 200), ("50 KB", 50 * 1024, 100), ("1 MB", 1024 * 1024, 25)]
SECRETS = (
    "Authorization: Bearer Zk9xQ2Lr7TbW1mNcV4pYs8Hd\n"
    "contact: build-bot@example.com\n"
    "AWS_ACCESS_KEY_ID=AKIAQX7Z2Y4W6V8U0T1S\n"
)


def _fill(head: str, line: Callable[[int], str], size: int) -> str:
    lines, total, number = [head, SECRETS], len(head) + len(SECRETS), 0
    while total < size:
        text = line(number)
        lines.append(text)
        total += len(text) + 1
        number += 1
    return "\n".join(lines)[:size]


def outputs(size: int) -> dict[str, str]:
    """One realistic output per default rule, ``size`` characters long."""
    return {
        "Read": _fill(
            "/repo/docs/spec.md",
            lambda i: f"{i}. The service SHALL keep requirement {i} (see section {i % 9}).",
            size,
        ),
        "Grep": _fill(
            "grep -rn error src/",
            lambda i: f"src/pkg{i % 50}/module_{i % 50}.py:{i}:    raise ValueError('error {i}')",
            size,
        ),
        "Bash": _fill(
            "$ git commit -am 'Fix eviction order'",
            lambda i: f"tests/test_{i}.py::test_case_{i} PASSED [{i % 100:3d}%]",
            size,
        ),
    }


def percentiles(samples: list[float]) -> tuple[float, float]:
    """(p50, p95) in milliseconds."""
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1000, p95 * 1000


async def run() -> list[tuple[str, str, int, float, float, float, float]]:
    rows = []
    rules = rules_for(Settings())
    with tempfile.TemporaryDirectory(prefix="gqlm-bench-") as tmp:
        async with AsyncMemoryStore(data_dir=Path(tmp) / "data") as store:
            for label, size, runs in SIZES:
                for tool, output in outputs(size).items():
                    rule = first_match(rules, tool, output)
                    assert rule is not None, tool
                    pipeline, ingest = [], []
                    for i in range(runs):
                        started = time.perf_counter()
                        redact(summarize(rule.summarizer, output, 1024 * 1024))
                        pipeline.append(time.perf_counter() - started)
                        started = time.perf_counter()
                        result = await store.extraction.ingest(tool, output, f"bench-{i % 4}")
                        ingest.append(time.perf_counter() - started)
                        assert result.stored and result.redaction_applied, result.reason
                    rows.append((label, tool, runs, *percentiles(pipeline), *percentiles(ingest)))
                    print(rows[-1], flush=True)
    return rows


def report(rows: list[tuple[str, str, int, float, float, float, float]], seconds: float) -> str:
    lines = [
        "# Extraction pipeline: ingestion latency",
        "",
        "`bench/bench_extraction.py` — `store.extraction.ingest(tool, output)` through the "
        "library against an embedded PostgreSQL 18 (temporary data directory, default "
        "settings: capacity 10, so nearly every ingest also evicts and archives one item). "
        "Each output carries three synthetic secrets (Bearer token, e-mail, AWS key id), so "
        "every ingest redacts. *pipeline* = match + summarize + redact in process; "
        "*ingest* = the whole call including the working-memory transaction.",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, {platform.system()} {platform.release()}; "
        f"total run {seconds:.1f} s.",
        "",
        "| output | tool (rule, summarizer) | runs | pipeline p50 ms | pipeline p95 ms "
        "| ingest p50 ms | ingest p95 ms |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    names = {
        "Read": "Read (read-spec, firstLast500)",
        "Grep": "Grep (grep-error, matchCountSummary)",
        "Bash": "Bash (bash-git-commit, stdoutSummary)",
    }
    for label, tool, runs, p50, p95, i50, i95 in rows:
        lines.append(
            f"| {label} | {names[tool]} | {runs} | {p50:.2f} | {p95:.2f} | {i50:.2f} | {i95:.2f} |"
        )
    lines += [
        "",
        "Reading the numbers: about 1 ms of every ingest is the working-memory transaction "
        "(advisory lock, insert, eviction, archive to stale memory). `matchCountSummary` is the "
        "only summarizer that walks the whole output (up to `GQL_MEMORY_EXTRACTION_SCAN_CHARS`, "
        "1 MiB) line by line in Python, so a 1 MB grep costs tens of milliseconds; "
        "`firstLast500` and `stdoutSummary` copy only what they keep, so their cost hardly "
        "grows with the output. Rule patterns run on RE2 over the whole output (linear time). "
        "Redaction runs on the summary (a few KB at most), not on the raw output.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    started = time.perf_counter()
    rows = asyncio.run(run())
    text = report(rows, time.perf_counter() - started)
    REPORT.parent.mkdir(exist_ok=True)
    REPORT.write_text(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
