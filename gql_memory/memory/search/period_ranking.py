"""Search step 7, ranking with the period read from the query (``interpretTime``): the search
runs as it would, and again limited to the period; the two rankings are fused by reciprocal
rank (``timeScore = 1/(k + rankWithoutPeriod) + 1/(k + periodRank)``), so a memory in the
period gains over one outside it, and a question whose period is wrong still finds what it
would have. Measured against filtering on the LoCoMo dev split (docs/benchmarks-retrieval.md).
"""

from __future__ import annotations

import dataclasses

from gql_memory.memory.search.types import MemoryLayer, QueryPeriod, SearchHit


def rank_with_period(
    plain: list[SearchHit],
    inside: list[SearchHit],
    period: QueryPeriod,
    rrf_k: int,
    top_k: int,
) -> list[SearchHit]:
    """The ``top_k`` hits ranked with ``period``: those of the search without the period
    (``plain``) and within it (``inside``; each its best ``max(top_k, TIME_RANKING_DEPTH)``),
    fused by reciprocal rank. A hit carries the numbers of the search without the period when
    it ranked there, else those of the search within it, and the period, both ranks and the
    fused ``time_score`` it sorts by."""
    hits: dict[tuple[MemoryLayer, int], SearchHit] = {}
    ranks: dict[tuple[MemoryLayer, int], list[int | None]] = {}
    for position, ranking in enumerate((plain, inside)):
        for rank, hit in enumerate(ranking, 1):
            key = (hit.layer, hit.id)
            hits.setdefault(key, hit)
            ranks.setdefault(key, [None, None])[position] = rank
    scores = {
        key: sum(1 / (rrf_k + r) for r in pair if r is not None) for key, pair in ranks.items()
    }
    order = sorted(
        hits,
        key=lambda key: (-scores[key], ranks[key][1] is None, key[0].value, key[1]),
    )
    return [
        dataclasses.replace(
            hits[key],
            interpreted_period=period,
            rank_without_period=ranks[key][0],
            period_rank=ranks[key][1],
            time_score=scores[key],
        )
        for key in order[:top_k]
    ]
