"""Search step 5, what lifts a candidate beyond its legs: its conversation session
(sessionShare), the speaker the query names (speakerBoost), and the graph: each of the best
hits lends part of its score to its one-hop neighbours (graphBoost), and bounded boosts come
from the session's working memory and its graph neighbours (seed 002 ADR-002). The graph
statement is memory/search/legs_sql.py's ``graph_sql``."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from gql_memory.config import Settings
from gql_memory.memory.search.legs_sql import (
    RAW_FACETS_DIGESTS_SQL,
    RAW_FACETS_SQL,
    graph_sql,
    statement,
)
from gql_memory.memory.search.types import LAYER_BY_NAME, Candidate, MemoryLayer, When
from gql_memory.memory.working.decay import decay_params


def bounded_boost(session_boost: float, causal_boost: float, cap: float) -> float:
    """ADR-002: the combined boost never exceeds the cap."""
    return min(session_boost + causal_boost, cap)


# Who a query speaks of when it names nobody: I (the asker), you (the one asked) or both.
# "me" alone is no sign: "Tell me about Paris" asks the assistant for what it knows.
_FIRST_PERSON = re.compile(r"(?<!\w)(i|my|mine|myself)(?!\w)", re.IGNORECASE)
_NOT_ASKER_ALONE = re.compile(
    r"(?<!\w)((?i:you|your|yours|yourself|we|our|ours|ourselves)|[Uu]s)(?!\w)"  # US: a country
)


def named_speakers(query: str, speakers: set[str], asker: str = "") -> set[str]:
    """The speakers a query names, as whole words in any case ("what does caroline paint").
    A query naming none that speaks in the first person only ("What brand of shampoo do I
    use?": I, my, mine or myself, and neither you nor we) names ``asker`` when it is one of
    ``speakers`` (in any case)."""
    named = {
        s
        for s in speakers
        if len(s) > 1 and re.search(rf"(?<!\w){re.escape(s)}(?!\w)", query, re.IGNORECASE)
    }
    if named or not asker or not _FIRST_PERSON.search(query) or _NOT_ASKER_ALONE.search(query):
        return named
    return {s for s in speakers if s.casefold() == asker.casefold()}


async def share_sessions(
    conn: Any,
    namespace: str,
    settings: Settings,
    candidates: list[Candidate],
    vector: str | None = None,
) -> dict[int, str]:
    """Hierarchical retrieval, softly: every raw candidate gains a share of the best fused
    score among the candidates of its conversation session (sessionShare), so that the
    session that answers the query best lifts its other turns (where the answer often is:
    a question's reply, the event's details). With GQL_MEMORY_SEARCH_DIGEST_SHARE, the
    session whose digest (consolidation) is nearest the query lends its turns more, within
    sessionShare. Returns the raw candidates' speakers."""
    raw = {c.id: c for c in candidates if c.layer is MemoryLayer.RAW}
    digest_share = settings.search_digest_share if vector is not None else 0.0
    if not raw or (
        not settings.search_session_share and not settings.search_speaker_boost and not digest_share
    ):
        return {}
    if digest_share:
        facets = statement(RAW_FACETS_DIGESTS_SQL)
        params = {"ns": namespace, "ids": list(raw), "vector": vector}
    else:
        facets, params = statement(RAW_FACETS_SQL), {"ns": namespace, "ids": list(raw)}
    rows = list(await conn.execute(facets, params))
    best: dict[str, float] = {}
    for row in rows:
        best[row.session_id] = max(best.get(row.session_id, 0.0), raw[row.id].fused_score)
    loans = _digest_loans(rows, best, digest_share) if digest_share else {}
    share = settings.search_session_share
    for row in rows:
        raw[row.id].session_share = share * best[row.session_id] + loans.get(row.session_id, 0.0)
        raw[row.id].final_score = raw[row.id].lending_score
    return {row.id: row.speaker for row in rows}


def _digest_loans(rows: list[Any], best: dict[str, float], share: float) -> dict[str, float]:
    """What each candidate session's digest lends its turns: ``share`` of the best fused
    score, scaled by how near its digest is to the query among the candidate sessions'
    digests (the nearest lends it all, the farthest nothing). Sessions without a candidate
    turn are not brought in."""
    near = {row.session_id: float(row.similarity) for row in rows if row.similarity is not None}
    if len(near) < 2:
        return {}
    low, high = min(near.values()), max(near.values())
    if high <= low:
        return {}
    top = max(best.values())
    return {s: share * top * (sim - low) / (high - low) for s, sim in near.items()}


def boost_speaker(
    query: str,
    candidates: list[Candidate],
    speakers: dict[int, str],
    factor: float,
    asker: str = "",
) -> None:
    """speakerBoost: when the query names one speaker of the raw candidates (by name, or
    ``asker`` by speaking in the first person), that speaker's candidate turns score
    1 + ``factor`` times as much: what a person did or said is told in their own turns, far
    more often than in the other side's. (A turn that only the graph brought is not a
    candidate: it keeps its loan as lent.)"""
    named = named_speakers(query, set(speakers.values()), asker) if factor else set()
    if len(named) != 1:
        return
    for hit in candidates:
        if hit.layer is MemoryLayer.RAW and speakers.get(hit.id) in named:
            hit.speaker_boost = factor
            hit.final_score *= 1 + factor


async def propagate_graph(
    conn: Any,
    namespace: str,
    settings: Settings,
    hits: list[Candidate],
    session_id: str | None,
    layers: list[MemoryLayer],
    when: When,
    moments: dict[str, datetime | None],
) -> list[Candidate]:
    """Graph propagation and boosts; neighbours that were no candidate join the hits."""
    share = settings.graph_propagation
    # a fixed number of lenders: the best hits lend alike whatever topK asks for
    lenders = sorted(hits, key=lambda h: (-h.lending_score, h.layer.value, h.id))[
        : settings.graph_propagation_lenders
    ]
    if share <= 0:
        lenders = []
    rows = (
        await conn.execute(
            statement(graph_sql(layers, when)),
            {
                **moments,
                "ns": namespace,
                "sid": session_id,
                "layers": [h.layer.value for h in hits],
                "ids": [h.id for h in hits],
                "lender_layers": [h.layer.value for h in lenders],
                "lender_ids": [h.id for h in lenders],
                "lender_scores": [h.lending_score for h in lenders],
                "fanout": settings.graph_propagation_fanout,
                "lend_max_chars": settings.graph_propagation_max_chars,
                **decay_params(settings),
            },
        )
    ).all()
    by_key = {(h.layer, h.id): h for h in hits}
    lent: dict[tuple[MemoryLayer, int], tuple[float, tuple[MemoryLayer, int]]] = {}
    boosts: dict[tuple[MemoryLayer, int], tuple[float | None, int | None]] = {}
    for kind, layer, id_, lender_layer, lender_id, score, attention, hops in rows:
        key = (LAYER_BY_NAME[layer], id_)
        if kind == "boost":
            boosts[key] = (attention, hops)
            continue
        lender = (LAYER_BY_NAME[lender_layer], lender_id)
        if lender == key:
            continue  # a memory does not lend to itself through a second node
        amount = share * score
        if amount > lent.get(key, (0.0, lender))[0]:
            lent[key] = (amount, lender)
    for key in boosts.keys() - by_key.keys():
        by_key[key] = Candidate(key[0], key[1])
    for key, hit in by_key.items():
        hit.graph_boost, hit.graph_source = lent.get(key, (0.0, None))
        attention, hops = boosts.get(key, (None, None))
        if attention and settings.session_boost:  # the ADR's rollback switches
            hit.session_boost = settings.session_boost_factor * attention
        if hops and settings.causal_boost:
            hit.causal_boost = {
                1: settings.causal_boost_one_hop,
                2: settings.causal_boost_two_hops,
            }.get(hops, 0.0)
        hit.boost = bounded_boost(hit.session_boost, hit.causal_boost, settings.boost_cap)
        hit.final_score = (hit.lending_score + hit.graph_boost) * (1 + hit.boost)
    return list(by_key.values())
