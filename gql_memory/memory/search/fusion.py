"""Search step 4, fusion of the legs: distribution-based score fusion (the default) and
reciprocal rank fusion. Pure functions; the measurements behind the defaults are in
docs/benchmarks-retrieval.md."""

from __future__ import annotations

import math
from collections.abc import Sequence

from gql_memory.memory.search.types import Candidate, Fusion, SearchWeights

# Each leg's scores are standardized over at most this many of its best candidates (and a
# search asks every leg for at least this many: memory/search/legs.py)
MIN_CANDIDATES = 40


def rrf(ranks: dict[str, int], weights: SearchWeights, k: int) -> float:
    """Reciprocal Rank Fusion: sum over legs of weight / (k + rank)."""
    return sum(getattr(weights, leg) / (k + rank) for leg, rank in ranks.items())


def standardized(scores: Sequence[float], sample: int | None = None) -> list[float]:
    """A leg's scores (best first) as distances above its worst candidate in standard
    deviations: (score - min) / stdev, both taken over the first ``sample`` scores (all by
    default), floored at 0. A leg whose sampled scores are all alike gives each 1."""
    if not scores:
        return []
    head = scores[:sample] if sample else scores
    low = min(head)
    mean = sum(head) / len(head)
    spread = math.sqrt(sum((x - mean) ** 2 for x in head) / len(head))
    if spread <= 1e-12:
        return [1.0 if x >= low else 0.0 for x in scores]
    return [max(0.0, (x - low) / spread) for x in scores]


def dbsf(
    legs: dict[str, dict[int, float]], weights: SearchWeights, sample: int | None = None
) -> dict[int, float]:
    """Distribution-based score fusion: each leg's scores are standardized over its best
    ``sample`` candidates (so cosine similarities and text scores become comparable, and a
    larger topK does not move them), then summed with the legs' weights. A candidate missing
    from a leg counts as that leg's worst (0)."""
    fused: dict[int, float] = {}
    for leg, scores in legs.items():
        weight = getattr(weights, leg)
        ordered = sorted(scores.items(), key=lambda item: -item[1])
        values = standardized([v for _, v in ordered], sample)
        for (key, _), value in zip(ordered, values, strict=True):
            fused[key] = fused.get(key, 0.0) + weight * value
    return fused


def fuse(candidates: list[Candidate], weights: SearchWeights, fusion: Fusion, rrf_k: int) -> None:
    """One fused score per candidate. RRF ranks each layer's legs apart (as the legs
    return them); DBSF standardizes each leg's scores over all its candidates, every
    layer together (cosines of one model, and text scores, are comparable across layers)."""
    legs: dict[str, dict[int, float]] = {}
    for index, c in enumerate(candidates):
        for leg, score in c.scores.items():
            legs.setdefault(leg, {})[index] = score
    scored = dbsf(legs, weights, MIN_CANDIDATES) if fusion is Fusion.DBSF else {}
    for index, c in enumerate(candidates):
        c.rrf_score = rrf(c.ranks, weights, rrf_k)
        c.fused_score = c.rrf_score if fusion is Fusion.RRF else scored.get(index, 0.0)
        c.final_score = c.fused_score
