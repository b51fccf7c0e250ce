"""The LongMemEval recall benchmark's report: recall@k and session recall-any@5 from the
questions' records, overall and per question type, with the costs beside."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import percentile

KS = (5, 10, 50)
HEADING = "## LongMemEval-S turn recall@k (RAW layer)"


@dataclass(frozen=True)
class IngestSpeed:
    """Turns of one question stored fresh, with the plain provider, and how long it took."""

    question_id: str
    turns: int
    seconds: float
    measured: str  # when (local time, to the minute)


@dataclass
class Run:
    """What the report is made of."""

    rows: tuple[str, ...]
    records: list[dict[str, Any]]  # of the selected questions, those done
    selected: int
    ingest: IngestSpeed | None
    state: Path
    cache: Path
    revision: str
    embedder: str
    tokens_by: str  # how tokens were counted


def recall_at(evidence: set[str], ranked: list[str], k: int) -> float:
    """The share of ``evidence`` in the first ``k`` of ``ranked``."""
    return len(evidence & set(ranked[:k])) / len(evidence) if evidence else float("nan")


def mean_recall(records: Sequence[dict[str, Any]], row: str, k: int) -> float:
    """recall@k of a row averaged over questions, in percent (every question here has
    evidence turns; one without would be left out)."""
    values = [recall_at(set(r["evidence"]), r["rankings"][row], k) for r in records]
    values = [v for v in values if v == v]
    return 100 * sum(values) / len(values) if values else float("nan")


def report(run: Run) -> list[str]:
    """The markdown section: the costs, then recall overall and per question type."""
    if not run.records:
        return [HEADING, "", f"No question done yet (state: {run.state}).", ""]
    return [*costs(run), "", *overall(run), "", *by_type(run), ""]


def costs(run: Run) -> list[str]:
    """What was measured, on what, and what it cost: ingest speed, embedding work, where the
    state and the cache are."""
    records, speed = run.records, run.ingest
    turns = sum(r["turns"] for r in records)
    per_turn = {
        name: sum(r[name] for r in records) / turns
        for name in ("project_documents", "project_tokens", "reference_tokens")
    }
    return [
        HEADING,
        "",
        f"{len(records)} of {run.selected} questions done, {turns} turns; embedder "
        f"{run.embedder}, revision {run.revision}.",
        "",
        ingest_line(speed),
        f"- embedded per turn: the project's recipe {per_turn['project_documents']:.2f} "
        f"documents, {per_turn['project_tokens']:.0f} tokens; the single-turn reference "
        f"{per_turn['reference_tokens']:.0f} tokens ({run.tokens_by}, text only); longer "
        f"than one pass of the model: {sum(r['project_windowed'] for r in records)} project "
        f"documents, {sum(r['reference_windowed'] for r in records)} single turns (both embedded "
        "in windows by the provider)",
        "- search latency: library call, top 50, query embedding included (as recorded when "
        "each question ran); the references are ranked in numpy, not timed",
        f"- state: {run.state}; embeddings: {run.cache}",
    ]


def ingest_line(speed: IngestSpeed | None) -> str:
    if speed is None:
        return "- ingest: not measured (--no-ingest-speed)"
    return (
        f"- ingest: {speed.turns} turns (the first of question {speed.question_id}) stored "
        f"fresh in {speed.seconds:.1f} s, {speed.turns / speed.seconds:.1f} turns/s (measured "
        f"{speed.measured}; embedding included, without the embedding cache)"
    )


def overall(run: Run) -> list[str]:
    """One line per row: R@5, R@10, R@50, session recall-any@5, search latency."""
    lines = [
        "| row | R@5 | R@10 | R@50 | session recall-any@5 | search p50 / p95 ms |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in run.rows:
        recalls = " | ".join(f"{mean_recall(run.records, row, k):.1f}" for k in KS)
        sessions = 100 * sum(r["session_any"][row] for r in run.records) / len(run.records)
        ms = [r["latency_ms"][row] for r in run.records if row in r["latency_ms"]]
        timing = f"{percentile(ms, 50):.0f} / {percentile(ms, 95):.0f}" if ms else "-"
        lines.append(f"| {row} | {recalls} | {sessions:.1f} | {timing} |")
    return lines


def by_type(run: Run) -> list[str]:
    """R@5 / R@10 / R@50 of every row per question type."""
    types = sorted({r["type"] for r in run.records})
    of_type = {t: [r for r in run.records if r["type"] == t] for t in types}
    lines = [
        "R@5 / R@10 / R@50 by question type (questions):",
        "",
        "| row | " + " | ".join(f"{t} ({len(of_type[t])})" for t in types) + " |",
        "| --- |" + " --- |" * len(types),
    ]
    for row in run.rows:
        cells = (" / ".join(f"{mean_recall(of_type[t], row, k):.0f}" for k in KS) for t in types)
        lines.append(f"| {row} | {' | '.join(cells)} |")
    return lines
