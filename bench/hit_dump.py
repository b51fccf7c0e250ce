"""Every hit of a recall benchmark's questions, written for the relevance fit (bench.relevance_fit).

One JSON line per question: where it was asked (its own memory, or another one), its
category, and its hits in rank order, each with the numbers a relevance model can read (the
legs' scores and ranks, the fused and final scores, the cosine) and whether it is evidence.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import TracebackType
from typing import IO

from gql_memory.memory.search.types import SearchHit

FEATURES = (
    "vector_score",
    "text_score",
    "vector_rank",
    "text_rank",
    "fused_score",
    "best_cosine",
    "best_text_score",
)


class HitDump:
    """A JSONL file of questions and their hits; does nothing without a path."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._file: IO[str] | None = None

    def __enter__(self) -> HitDump:
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("w")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._file is not None:
            self._file.close()

    async def __aenter__(self) -> HitDump:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    def __bool__(self) -> bool:
        return self._file is not None

    def add(
        self,
        group: str,
        question: str,
        category: str,
        evidence: set[str],
        hits: list[SearchHit],
        ids: dict[int, str],
        asked_of: str | None = None,
    ) -> None:
        """``group``: the question's own memory (its cross-validation fold); ``asked_of``:
        another memory it was asked of (its hits are none of its evidence)."""
        if self._file is None:
            return
        record = {
            "group": group,
            "asked_of": asked_of or group,
            "question": question,
            "category": category,
            "evidence": len(evidence),
            "hits": [
                {
                    "rank": rank,
                    "cosine": hit.cosine,
                    "final_score": hit.final_score,
                    "relevance": hit.relevance,
                    "tokens": len(hit.content) // 4 + 1,
                    "evidence": ids.get(hit.id) in evidence,
                    **{name: getattr(hit, name, None) for name in FEATURES},
                }
                for rank, hit in enumerate(hits, 1)
            ],
        }
        self._file.write(json.dumps(record) + "\n")
