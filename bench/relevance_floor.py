"""Knowing when nothing is relevant (issue 30), measured inside `python -m bench locomo_recall`.

- Calibration: the hybrid's top 10 hits of every question, bucketed by their relevance, with
  the share of them that are evidence: a calibrated relevance predicts that share.
- Context with the default floor against no floor: the share of the evidence turns that the
  question's `context` holds (its search section), with minRelevance at its default and at 0.
- Asked elsewhere: each question asked of the next conversation's memory (whose speakers and
  events are others'), with the default floor: the share of contexts that come back empty.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from gql_memory.memory import Memory
from gql_memory.memory.context.packing import ItemKind
from gql_memory.memory.search.relevance import calibration_for, context_floor
from gql_memory.memory.search.types import SearchHit

SESSION = "relevance-check"  # a session without working memory: a context holds only memory
BINS = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0001)


def default_floor(memory: Memory) -> float:
    return context_floor(memory.settings, calibration_for(memory.embedder.model))


@dataclass
class RelevanceCheck:
    """What the floor keeps and leaves, over one run."""

    bins: dict[int, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    floored: list[float] = field(default_factory=list)  # context evidence recall, default floor
    unfloored: list[float] = field(default_factory=list)  # and with minRelevance 0
    elsewhere: list[bool] = field(default_factory=list)  # asked of another memory: empty?
    elsewhere_items: list[int] = field(default_factory=list)
    floor: float = 0.0

    def calibrate(self, hits: list[SearchHit], evidence: set[str], ids: dict[int, str]) -> None:
        for hit in hits[:10]:
            index = next(i for i in range(len(BINS) - 1) if hit.relevance < BINS[i + 1])
            self.bins[index][0] += 1
            self.bins[index][1] += ids.get(hit.id) in evidence

    async def context_recall(
        self, memory: Memory, question: str, evidence: set[str], ids: dict[int, str]
    ) -> None:
        self.floor = default_floor(memory)
        for floor, into in ((None, self.floored), (0.0, self.unfloored)):
            context = await memory.context(question, SESSION, min_relevance=floor)
            found = {
                ids.get(int(item.id))
                for section in context.sections
                for item in section.items
                if item.kind is ItemKind.RAW
            }
            into.append(len(evidence & found) / len(evidence))

    async def asked_elsewhere(self, memory: Memory, question: str) -> None:
        context = await memory.context(question, SESSION)
        items = sum(len(section.items) for section in context.sections)
        self.elsewhere.append(items == 0)
        self.elsewhere_items.append(items)

    def lines(self) -> list[str]:
        if not self.floored:
            return []
        mean = lambda xs: 100 * sum(xs) / len(xs)  # noqa: E731
        lines = [
            "",
            "Knowing when nothing is relevant (issue 30): every hit's relevance, and the "
            f"default floor minRelevance {self.floor:g}.",
            "",
            "| relevance of a top-10 hit | hits | evidence among them |",
            "| --- | --- | --- |",
        ]
        for index, (count, evidence) in sorted(self.bins.items()):
            if count:
                low, high = BINS[index], min(BINS[index + 1], 1.0)
                lines.append(f"| {low:g}-{high:g} | {count} | {100 * evidence / count:.1f}% |")
        lines += [
            "",
            "| context (default budget) | evidence recall |",
            "| --- | --- |",
            f"| minRelevance 0 (no floor) | {mean(self.unfloored):.1f} |",
            f"| default floor ({self.floor:g}) | {mean(self.floored):.1f} |",
            "",
            f"Each question asked of the next conversation's memory: {mean(self.elsewhere):.1f}% "
            f"of {len(self.elsewhere)} contexts come back empty (default floor; "
            f"{sum(self.elsewhere_items) / len(self.elsewhere_items):.2f} items on average).",
        ]
        return lines
