"""Search step 3, the legs: the vector leg (cosine over the embeddings) and the text leg (BM25
over the namespace's own word statistics) of every layer searched, in one statement
(memory/search/legs_sql.py), as candidates with each leg's rank and score."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from gql_memory.config import Settings
from gql_memory.memory.search.fusion import MIN_CANDIDATES
from gql_memory.memory.search.legs_sql import legs_sql, statement
from gql_memory.memory.search.types import (
    LAYER_BY_NAME,
    Candidate,
    MemoryLayer,
    SearchWeights,
    When,
)

# The text leg's statistics in a namespace larger than its budget come from this share of the
# budget, its newest rows (a small namespace's come from all of its rows).
STATISTICS_SHARE = 4


async def run_legs(
    conn: Any,
    namespace: str,
    settings: Settings,
    query: str,
    vector: str | None,
    layers: list[MemoryLayer],
    rated: list[MemoryLayer],
    weights: SearchWeights,
    top_k: int,
    when: When,
    moments: dict[str, datetime | None],
) -> tuple[list[Candidate], float | None]:
    """The candidates of the legs, and the best cosine of the ``rated`` layers (not
    searched: a hit's chance that the namespace holds the answer is rated against the whole
    namespace, whichever layers are searched)."""
    sql = legs_sql(layers, when, vector=vector is not None, text=bool(weights.text), rated=rated)
    rows = (
        await conn.execute(
            statement(sql),
            {
                "ns": namespace,
                "query": query,
                "tsconfig": settings.text_search_config,
                "vector": vector,
                "n": max(top_k * 4, MIN_CANDIDATES),
                "max_matches": settings.text_search_max_matches,
                "rerank": 4 * max(top_k * 4, MIN_CANDIDATES),
                "count_cap": max(settings.vector_exact_max_rows, settings.text_search_max_matches)
                + 1,
                "sample_rows": max(settings.text_search_max_matches // STATISTICS_SHARE, 1),
                "bm25_k1": settings.text_search_bm25_k1,
                "bm25_b": settings.text_search_bm25_b,
                "exact_rows": settings.vector_exact_max_rows,
                **moments,
            },
        )
    ).all()
    candidates: dict[tuple[str, int], Candidate] = {}
    position: dict[tuple[str, str], int] = {}
    elsewhere: float | None = None
    for layer, leg, id_, score in rows:  # rows of each leg arrive in rank order
        if leg == "best":
            elsewhere = float(score) if elsewhere is None else max(elsewhere, float(score))
            continue
        rank = position[(layer, leg)] = position.get((layer, leg), 0) + 1
        candidate = candidates.get((layer, id_))
        if candidate is None:
            candidate = candidates[(layer, id_)] = Candidate(LAYER_BY_NAME[layer], id_)
        candidate.ranks[leg] = rank
        candidate.scores[leg] = float(score)
    return list(candidates.values()), elsewhere
