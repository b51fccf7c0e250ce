"""Search steps 6 and 8, the hits as the caller sees them: the best candidates with their
content, validity, cosine and relevance (memory/search/relevance.py), and every number that
explains their rank."""

from __future__ import annotations

from typing import Any

from gql_memory.memory.search.legs_sql import LAYERS, content_sql, statement
from gql_memory.memory.search.relevance import Calibration, plain_relevance, rate, relevances
from gql_memory.memory.search.types import Candidate, Fusion, SearchHit


async def explained_hits(
    conn: Any,
    namespace: str,
    candidates: list[Candidate],
    fusion: Fusion,
    vector: str | None,
    best_cosine: float | None,
    best_text_score: float | None,
    calibration: Calibration | None,
) -> list[SearchHit]:
    """The final hits with their content and relevance, rated against the query's best
    cosine in the namespace and best text score among the candidates, and by rank (a hit
    whose row is gone meanwhile is left out)."""
    if not candidates:
        return []
    params: dict[str, Any] = {"ns": namespace, "vector": vector}
    for layer in LAYERS:
        params[f"ids_{layer.value.lower()}"] = [h.id for h in candidates if h.layer is layer]
    sql = content_sql({h.layer for h in candidates}, vector=vector is not None)
    rows = (await conn.execute(statement(sql), params)).all()
    found = {(r.layer, r.id): r for r in rows}
    kept = [
        (rank, hit, row)
        for rank, hit in enumerate(candidates, 1)
        if (row := found.get((hit.layer.value, hit.id))) is not None
    ]
    rated = [
        rate(
            row.cosine,
            hit.scores.get("text"),
            best_cosine,
            calibration,
            best_text_score=best_text_score,
            rank=rank,
        )
        for rank, hit, row in kept
    ]
    plain = [plain_relevance(row.cosine, hit.scores.get("text")) for _, hit, row in kept]
    return [
        SearchHit(
            layer=hit.layer,
            id=hit.id,
            content=row.content,
            session_id=row.session_id,
            vector_rank=hit.ranks.get("vector"),
            text_rank=hit.ranks.get("text"),
            vector_score=hit.scores.get("vector"),
            text_score=hit.scores.get("text"),
            fusion=fusion,
            fused_score=hit.fused_score,
            rrf_score=hit.rrf_score,
            session_share=hit.session_share,
            speaker_boost=hit.speaker_boost,
            graph_boost=hit.graph_boost,
            graph_source=hit.graph_source,
            valid_from=row[4],
            valid_to=row[5],
            superseded_by=row[6],
            timestamp=row.happened,
            session_boost=hit.session_boost,
            causal_boost=hit.causal_boost,
            boost=hit.boost,
            final_score=hit.final_score,
            cosine=row.cosine,
            relevance=rated_relevance,
            best_cosine=best_cosine,
            best_text_score=best_text_score,
        )
        for (_, hit, row), rated_relevance in zip(kept, relevances(rated, plain), strict=True)
    ]
