"""Search step 7, ranking with the period read from the query (``interpretTime``): time
re-ranks what the search found on its content, and never brings in a memory it would not
consider.

The search ranks its best ``max(topK, TIME_RANKING_DEPTH)`` hits as it would without the
period; among them, a hit inside the period gains the most, a hit of the period's tail (the
days after it, up to the reference time: what is told after the event, "last week I ...")
half as much, any other hit nothing:

    timeScore = 1/(k + rankWithoutPeriod) + w/(k + periodRank)

where ``periodRank`` is the hit's rank among the hits in the period or its tail (those inside
first) and ``w`` is 1 inside, 1/2 in the tail, 0 elsewhere. With k = GQL_MEMORY_RRF_K (60)
and at most 60 hits ranked, every hit inside comes before every hit of the tail, and those
before every other hit; each group keeps the order of the search without the period. A
question whose period is wrong still finds what it would have, in the first ranks of the
others. Measured on both dev splits (docs/benchmarks-retrieval.md).
"""

from __future__ import annotations

import dataclasses
from datetime import datetime

from gql_memory.memory.search.types import QueryPeriod, SearchHit

INSIDE, TAIL, OUTSIDE = 0, 1, 2
WEIGHTS = {INSIDE: 1.0, TAIL: 0.5, OUTSIDE: 0.0}


def when_in_period(hit: SearchHit, period: QueryPeriod) -> int:
    """INSIDE, TAIL or OUTSIDE: a raw turn by its time, a fact by its validity (a fact valid
    during some of the period is inside it)."""
    if hit.timestamp is not None:
        return _moment_in(hit.timestamp, period)
    if hit.valid_from is None:
        return OUTSIDE
    return min(
        _span_in(hit.valid_from, hit.valid_to, period.start, period.end, INSIDE),
        _span_in(hit.valid_from, hit.valid_to, period.end, period.until, TAIL),
    )


def _moment_in(moment: datetime, period: QueryPeriod) -> int:
    if period.start <= moment < period.end:
        return INSIDE
    if period.end <= moment <= period.until:
        return TAIL
    return OUTSIDE


def _span_in(
    valid_from: datetime, valid_to: datetime | None, start: datetime, end: datetime, found: int
) -> int:
    """``found`` when [valid_from, valid_to) meets [start, end], else OUTSIDE."""
    if valid_from <= end and (valid_to is None or valid_to > start):
        return found
    return OUTSIDE


def rank_with_period(
    plain: list[SearchHit], period: QueryPeriod, rrf_k: int, top_k: int
) -> list[SearchHit]:
    """The ``top_k`` hits of ``plain`` (the search's ranking without the period, at the time
    ranking's depth) re-ranked with ``period``: each carries the period, its rank without it,
    its rank among the hits in the period or its tail, and the ``time_score`` it sorts by."""
    where = [when_in_period(hit, period) for hit in plain]
    in_order = sorted(
        (i for i, place in enumerate(where) if place != OUTSIDE), key=lambda i: (where[i], i)
    )
    period_rank = {i: rank for rank, i in enumerate(in_order, 1)}
    scores = [
        1 / (rrf_k + i + 1)
        + (WEIGHTS[where[i]] / (rrf_k + period_rank[i]) if i in period_rank else 0.0)
        for i in range(len(plain))
    ]
    order = sorted(range(len(plain)), key=lambda i: (-scores[i], where[i], i))
    return [
        dataclasses.replace(
            plain[i],
            interpreted_period=period,
            rank_without_period=i + 1,
            period_rank=period_rank.get(i),
            time_score=scores[i],
        )
        for i in order[:top_k]
    ]
