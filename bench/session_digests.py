"""Session digests for the recall benchmarks (--digests of bench.locomo_recall and
bench.longmemeval_recall): after a namespace's turns are stored, one consolidation pass
(``Memory(...).consolidation.run()``) with GQL_MEMORY_CONSOLIDATION_DIGEST_QUIET_S at 0, so
that every session of at least consolidation_digest_min_turns turns gets its digest insight
(``digest_of`` = the session), as the hourly schedule would once the sessions are quiet. The
benchmarks store raw turns only, so the pass finds no insight to merge or supersede: its
actions are counted by kind to show it. GQL_MEMORY_SEARCH_DIGEST_SHARE (--digest-share) then
decides whether raw-turn search reads the digests."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.embeddings import EmbeddingProvider
from gql_memory.memory import Memory


@dataclass
class DigestTally:
    """What the consolidation passes of a run did, summed over namespaces."""

    namespaces: int = 0
    sessions_examined: int = 0
    actions: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    def add(self, record: dict[str, Any]) -> None:
        self.namespaces += 1
        self.sessions_examined += record["sessions_examined"]
        self.actions.update(record["actions"])
        self.seconds += record["seconds"]

    def line(self) -> str:
        kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(self.actions.items())) or "none"
        return (
            f"- session digests (--digests): one consolidation pass per namespace "
            f"(consolidation_digest_quiet_s 0) over {self.namespaces} namespaces, "
            f"{self.sessions_examined} sessions examined; actions by kind: {kinds}; "
            f"{self.seconds:.1f} s (digest embeddings included, not cached)"
        )


async def digest_sessions(
    db: Database, settings: Settings, namespace: str, embedder: EmbeddingProvider
) -> dict[str, Any]:
    """One consolidation pass over ``namespace`` with every session quiet; what it did."""
    quiet = settings.with_overrides(consolidation_digest_quiet_s=0.0)
    started = time.perf_counter()
    report = await Memory(db, quiet, namespace, embedder).consolidation.run()
    return {
        "sessions_examined": report.sessions_examined,
        "actions": dict(Counter(str(a.kind) for a in report.actions)),
        "complete": report.complete,
        "seconds": time.perf_counter() - started,
    }
