"""Counts per layer for one namespace (one round trip)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text

from gql_memory.db import Database

# Every layer's count in one statement: a scalar subquery per table (one index range each).
MEMORY_STATS_SQL = """
SELECT
  (SELECT count(*) FROM raw_dialogue WHERE namespace = :ns) AS raw_dialogue,
  (SELECT count(*) FROM working_memory WHERE namespace = :ns) AS working_memory,
  (SELECT count(*) FROM stale_memory WHERE namespace = :ns) AS stale_memory,
  (SELECT count(*) FROM insights WHERE namespace = :ns) AS insights,
  (SELECT count(*) FROM episodes WHERE namespace = :ns) AS episodes,
  (SELECT count(*) FROM nodes WHERE namespace = :ns) AS nodes,
  (SELECT count(*) FROM edges WHERE namespace = :ns) AS edges,
  (SELECT count(*) FROM (
      SELECT session_id FROM working_memory WHERE namespace = :ns
      UNION SELECT session_id FROM raw_dialogue WHERE namespace = :ns
      UNION SELECT session_id FROM stale_memory WHERE namespace = :ns
  ) s) AS sessions,
  (SELECT count(*) FROM raw_dialogue WHERE namespace = :ns AND embedding_waiting)
    + (SELECT count(*) FROM insights WHERE namespace = :ns AND embedding_waiting)
    + (SELECT count(*) FROM episodes WHERE namespace = :ns AND embedding_waiting)
    AS embeddings_waiting
"""


@dataclass(frozen=True)
class MemoryStats:
    raw_dialogue: int
    working_memory: int
    stale_memory: int
    insights: int
    episodes: int
    nodes: int
    edges: int
    sessions: int  # sessions holding anything: working memory, dialogue or archived items
    # rows stored while the embedder was down, waiting for their vectors (memory.waiting)
    embeddings_waiting: int = 0


async def memory_stats(db: Database, namespace: str) -> MemoryStats:
    async with db.read() as conn:
        row = (await conn.execute(text(MEMORY_STATS_SQL), {"ns": namespace})).one()
    return MemoryStats(**row._mapping)
