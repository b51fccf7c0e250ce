"""Context assembly (SPEC §3.9): what an agent should see next, packed under a token budget.

Four sections, each item with why it was chosen and its token cost:
working memory of the session (highest attention first), hybrid-search hits (with their
ranks, scores and boosts), lessons from similar episodes (reflection and reward) and graph
facts one hop around the top hits (``source —relation→ target``, through the nodes tied to a
hit by nodes.insight_id / episode_id / raw_id). The budget split is documented in
gql_memory.memory.context.packing.

Deterministic for the same data: every list has a total order (ties broken by id). Bounded
work: the query is embedded once, then at most six SQL round trips (working memory; search
legs, boosts and contents; similar episodes; graph facts) whatever the data size.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import text

from gql_memory.config import (
    CONTEXT_DEFAULT_MAX_TOKENS,
    CONTEXT_EPISODES_TOP_K,
    CONTEXT_GRAPH_FACTS,
    CONTEXT_GRAPH_SEED_HITS,
    CONTEXT_MAX_TOKENS,
    CONTEXT_MIN_TOKENS,
    CONTEXT_SEARCH_TOP_K,
    MAX_QUERY_CHARS,
    Settings,
)
from gql_memory.db import Database
from gql_memory.embeddings import EmbeddingProvider, TextRole
from gql_memory.embeddings.once import EmbedOnce
from gql_memory.errors import ServiceUnavailableError, ValidationError
from gql_memory.memory.context.packing import (
    CHARS_PER_TOKEN_BOUND,
    Candidate,
    Item,
    ItemKind,
    Packer,
    Section,
    SectionCandidates,
    SectionKind,
)
from gql_memory.memory.context.tokens import DEFAULT_TOKENIZER, Tokenizer
from gql_memory.memory.episodes import DEFAULT_MIN_SIMILARITY, EpisodeHit, Episodes
from gql_memory.memory.offload import run_cpu
from gql_memory.memory.search.period import periods_not_read
from gql_memory.memory.search.pipeline import HybridSearch
from gql_memory.memory.search.relevance import (
    Calibration,
    calibration_for,
    context_floor,
    relevance,
    require_min_relevance,
)
from gql_memory.memory.search.request import require_interpret_time, require_reference_time
from gql_memory.memory.search.types import MemoryLayer, SearchHit, SearchWeights
from gql_memory.memory.validation import require_session_id, require_text
from gql_memory.memory.validity import require_as_of
from gql_memory.memory.working.working_memory import WorkingMemory, WorkingMemoryItem

__all__ = ["Context", "ContextAssembler", "Item", "ItemKind", "Section", "SectionKind"]

ALL_SECTIONS = tuple(SectionKind)
HEADERS = {
    SectionKind.WORKING: "## Working memory (highest attention first)",
    SectionKind.SEARCH: "## Relevant memories (hybrid search, best first)",
    SectionKind.EPISODES: "## Lessons from similar past episodes",
    SectionKind.GRAPH: "## Related facts (knowledge graph)",
}

# Edges touching the nodes tied to the top hits, each once (through its best-ranked hit).
GRAPH_FACTS_SQL = """
WITH hit AS (
    SELECT * FROM unnest(CAST(:layers AS text[]), CAST(:ids AS bigint[]), CAST(:ords AS int[]))
        AS h(layer, id, ord)
),
seed AS (
    SELECT n.id AS node_id, n.label, n.name, hit.layer, hit.id AS hit_id, hit.ord
    FROM hit JOIN nodes n ON n.namespace = :ns AND (
        (hit.layer = 'INSIGHT' AND n.insight_id = hit.id)
        OR (hit.layer = 'EPISODE' AND n.episode_id = hit.id)
        OR (hit.layer = 'RAW' AND n.raw_id = hit.id))
),
-- facts a client or agent recorded; the automatic structure (NEXT, MENTIONS...) is no fact
touch AS (
    SELECT e.id AS edge_id, seed.* FROM seed
    JOIN edges e ON e.namespace = :ns AND e.source_id = seed.node_id
    WHERE NOT coalesce(e.properties @> '{"auto": true}', false)
      AND e.valid_from <= coalesce(CAST(:as_of AS timestamptz), now())
      AND (e.valid_to IS NULL OR e.valid_to > coalesce(CAST(:as_of AS timestamptz), now()))
    UNION ALL
    SELECT e.id, seed.* FROM seed
    JOIN edges e ON e.namespace = :ns AND e.target_id = seed.node_id
    WHERE NOT coalesce(e.properties @> '{"auto": true}', false)
      AND e.valid_from <= coalesce(CAST(:as_of AS timestamptz), now())
      AND (e.valid_to IS NULL OR e.valid_to > coalesce(CAST(:as_of AS timestamptz), now()))
),
best AS (SELECT DISTINCT ON (edge_id) * FROM touch ORDER BY edge_id, ord, node_id)
SELECT e.id, e.relation, e.weight, s.label AS source_label, s.name AS source_name,
       t.label AS target_label, t.name AS target_name,
       b.layer, b.hit_id, b.ord, b.label AS seed_label, b.name AS seed_name
FROM best b
JOIN edges e ON e.namespace = :ns AND e.id = b.edge_id
JOIN nodes s ON s.namespace = e.namespace AND s.id = e.source_id
JOIN nodes t ON t.namespace = e.namespace AND t.id = e.target_id
ORDER BY b.ord, e.weight DESC, e.id
LIMIT :n
"""


@dataclass(frozen=True)
class Context:
    """The assembled context: paste ``text`` into the prompt; the rest explains it."""

    query: str
    session_id: str
    text: str
    total_tokens: int
    max_tokens: int
    sections: tuple[Section, ...]
    tokenizer: str
    notes: tuple[str, ...] = ()  # what could not be included, and why
    # search hits and lessons left out because their relevance was below the floor
    # (minRelevance); hits that working memory refers to are not counted (never repeated)
    below_relevance: int = 0
    min_relevance: float = 0.0


def require_max_tokens(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError("maxTokens must be an integer")
    if not CONTEXT_MIN_TOKENS <= value <= CONTEXT_MAX_TOKENS:
        raise ValidationError(
            f"maxTokens must be between {CONTEXT_MIN_TOKENS} and {CONTEXT_MAX_TOKENS}"
        )
    return value


def require_sections(include: Sequence[SectionKind | str]) -> list[SectionKind]:
    if not include:
        raise ValidationError("include must name at least one section")
    try:
        chosen = {x if isinstance(x, SectionKind) else SectionKind(str(x)) for x in include}
    except ValueError as exc:
        raise ValidationError("include must be WORKING, SEARCH, EPISODES or GRAPH") from exc
    return [kind for kind in ALL_SECTIONS if kind in chosen]


class ContextAssembler:
    """Assembles contexts for one namespace."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        namespace: str,
        embedder: EmbeddingProvider,
        working: WorkingMemory,
        tokenizer: Tokenizer = DEFAULT_TOKENIZER,
    ) -> None:
        self.db = db
        self.settings = settings
        self.namespace = namespace
        self.embedder = embedder
        self.working = working
        self.packer = Packer(tokenizer)

    async def _pack(
        self, offers: list[SectionCandidates], max_tokens: int
    ) -> tuple[str, list[Section], int]:
        """Packing (and counting the result) is linear in the budget; a large one runs in a
        worker thread, so one request's packing never stalls the others' (the event loop
        stays free)."""
        return await run_cpu(
            max_tokens * CHARS_PER_TOKEN_BOUND, self.packer.pack_counted, offers, max_tokens
        )

    async def assemble(
        self,
        query: str,
        session_id: str = "default",
        max_tokens: int = CONTEXT_DEFAULT_MAX_TOKENS,
        include: Sequence[SectionKind | str] = ALL_SECTIONS,
        *,
        as_of: datetime | None = None,
        reference_time: datetime | None = None,
        interpret_time: bool | None = None,
        min_relevance: float | None = None,
    ) -> Context:
        """The best context for ``query`` in ``session_id`` within ``max_tokens`` tokens.
        With ``as_of``, search, episodes and graph facts are those valid at that instant
        (working memory is the session's, as it is now). ``interpret_time`` and
        ``reference_time`` are the search's (a period the query names ranks hits in it
        higher), ``reference_time`` by default ``as_of`` in its own timezone. No search hit
        or lesson whose relevance is below ``min_relevance`` (default:
        GQL_MEMORY_CONTEXT_MIN_RELEVANCE, else the embedding model's calibrated floor) is
        added; the context says how many were left out (a memory with nothing on the query
        gives a context of working memory alone)."""
        query = require_text(query, "query", max_length=MAX_QUERY_CHARS)
        calibration = calibration_for(self.embedder.model)
        floor = require_min_relevance(min_relevance, context_floor(self.settings, calibration))
        reference_time = require_reference_time(reference_time)
        given_as_of = as_of  # the search reads time against it in its own timezone
        as_of = require_as_of(as_of)
        interpret_time = require_interpret_time(interpret_time, self.settings)
        session_id = require_session_id(session_id)
        max_tokens = require_max_tokens(max_tokens)
        sections = require_sections(include)
        embedder = EmbedOnce(self.embedder)
        wants_search = SectionKind.SEARCH in sections or SectionKind.GRAPH in sections
        wants_episodes = SectionKind.EPISODES in sections
        notes: list[str] = []
        vectors = True
        if wants_search or wants_episodes:
            try:
                await embedder.embed(
                    [query], role=TextRole.QUERY
                )  # once, before the concurrent readers share it
            except ServiceUnavailableError as exc:
                # An agent loop should not stop because the embedding provider hiccups.
                vectors = False
                notes.append(f"embeddings unavailable ({exc}): full-text search only")
                if wants_episodes:
                    notes.append("episodes skipped: their similarity needs embeddings")
                wants_episodes = False
        with periods_not_read() as unread:
            items, hits, lessons = await asyncio.gather(
                self._working(session_id) if SectionKind.WORKING in sections else _nothing(),
                self._search(
                    embedder,
                    query,
                    session_id,
                    sections,
                    vectors,
                    given_as_of,
                    reference_time,
                    interpret_time,
                )
                if wants_search
                else _nothing(),
                self._episodes(embedder, query, as_of) if wants_episodes else _nothing(),
            )
        notes += unread
        referred = {(i.ref_kind.value, i.ref_id) for i in items if i.ref_kind is not None}
        kept = _relevant_lessons(lessons, hits, floor, calibration)
        left_out = [(h.layer.value, h.id) for h in hits if h.relevance < floor]
        left_out += [("EPISODE", lesson.episode.id) for lesson in lessons if lesson not in kept]
        # what working memory refers to is never repeated: it is not counted as left out
        below = sum(1 for key in left_out if key not in referred)
        hits = [h for h in hits if h.relevance >= floor]
        lessons = kept
        if below:
            notes.append(f"{below} memories left out: relevance below {floor:g} (minRelevance)")
        offers = []
        if SectionKind.WORKING in sections:
            offers.append(self._offer(SectionKind.WORKING, _working_candidates(items, hits)))
        if SectionKind.SEARCH in sections:
            offers.append(self._offer(SectionKind.SEARCH, _search_candidates(hits, referred)))
        if wants_episodes:
            offers.append(self._offer(SectionKind.EPISODES, _episode_candidates(lessons)))
        if SectionKind.GRAPH in sections:
            facts = await self._facts(hits, lessons, as_of)
            offers.append(self._offer(SectionKind.GRAPH, facts))
        text_, packed, total_tokens = await self._pack(offers, max_tokens)
        return Context(
            query=query,
            session_id=session_id,
            text=text_,
            total_tokens=total_tokens,
            max_tokens=max_tokens,
            sections=tuple(packed),
            tokenizer=self.packer.tokenizer.name,
            notes=tuple(notes),
            below_relevance=below,
            min_relevance=floor,
        )

    @staticmethod
    def _offer(kind: SectionKind, candidates: list[Candidate]) -> SectionCandidates:
        purpose = {
            SectionKind.WORKING: "the session's working memory, highest attention first",
            SectionKind.SEARCH: "hybrid search hits for the query (vector + full text fused, "
            "graph propagation, session and graph boosts), best first",
            SectionKind.EPISODES: "lessons (reflection and reward) of past episodes similar "
            "to the query",
            SectionKind.GRAPH: "graph edges one hop around the nodes tied to the top hits",
        }[kind]
        return SectionCandidates(kind, HEADERS[kind], purpose, candidates)

    async def _working(self, session_id: str) -> list[WorkingMemoryItem]:
        items = await self.working.list(session_id)
        return sorted(items, key=lambda i: (-i.attention, -i.last_accessed.timestamp(), -i.id))

    async def _search(
        self,
        embedder: EmbeddingProvider,
        query: str,
        session_id: str,
        sections: list[SectionKind],
        vectors: bool,
        as_of: datetime | None,
        reference_time: datetime | None,
        interpret_time: bool,
    ) -> list[SearchHit]:
        layers = [MemoryLayer.INSIGHT, MemoryLayer.RAW]
        if SectionKind.EPISODES not in sections:  # otherwise episodes have their own section
            layers.append(MemoryLayer.EPISODE)
        search = HybridSearch(self.db, self.settings, self.namespace, embedder)
        weights = None if vectors else SearchWeights(vector=0.0, text=1.0)
        return await search.search(
            query,
            CONTEXT_SEARCH_TOP_K,
            session_id,
            layers,
            weights,
            as_of=as_of,
            reference_time=reference_time,
            interpret_time=interpret_time,
            min_relevance=0.0,  # the floor is applied by assemble, which counts what it leaves
        )

    async def _episodes(
        self, embedder: EmbeddingProvider, query: str, as_of: datetime | None
    ) -> list[EpisodeHit]:
        episodes = Episodes(self.db, self.settings, self.namespace, embedder)
        hits = await episodes.similar(
            query, DEFAULT_MIN_SIMILARITY, CONTEXT_EPISODES_TOP_K, as_of=as_of
        )
        return sorted(hits, key=lambda h: (-h.similarity, h.episode.id))

    async def _facts(
        self, hits: list[SearchHit], lessons: list[EpisodeHit], as_of: datetime | None
    ) -> list[Candidate]:
        seeds = [(h.layer.value, h.id) for h in hits[:CONTEXT_GRAPH_SEED_HITS]]
        origin = {n: f"search hit #{n}" for n in range(1, len(seeds) + 1)}
        for lesson in lessons:
            seeds.append(("EPISODE", lesson.episode.id))
            origin[len(seeds)] = "similar episode"
        if not seeds:
            return []
        async with self.db.read() as conn:
            rows = (
                await conn.execute(
                    text(GRAPH_FACTS_SQL),
                    {
                        "ns": self.namespace,
                        "layers": [layer for layer, _ in seeds],
                        "ids": [i for _, i in seeds],
                        "ords": list(range(1, len(seeds) + 1)),
                        "n": CONTEXT_GRAPH_FACTS,
                        "as_of": as_of,
                    },
                )
            ).all()
        return [
            Candidate(
                ItemKind.FACT,
                str(r.id),
                f"{r.source_name} ({r.source_label}) —{r.relation}→ "
                f"{r.target_name} ({r.target_label})",
                f"edge one hop from node {r.seed_label}:{r.seed_name}, tied to "
                f"{r.layer} {r.hit_id} ({origin[r.ord]}); weight {r.weight:g}",
            )
            for r in rows
        ]


async def _nothing() -> list[Any]:
    return []


def _relevant_lessons(
    lessons: list[EpisodeHit],
    hits: list[SearchHit],
    floor: float,
    calibration: Calibration | None,
) -> list[EpisodeHit]:
    """The lessons whose relevance reaches ``floor``. A lesson is found by its similarity
    alone (no text score); the best cosine the query reached is the best of the search's
    hits and of the lessons, as for a search hit (gql_memory.memory.search.relevance). Similar
    enough for the episodes' own threshold is not relevant enough: e5-small scores
    unrelated sentences around 0.75."""
    if floor <= 0:
        return lessons
    cosines = [h.cosine for h in hits if h.cosine is not None]
    best = max([*cosines, *(lesson.similarity for lesson in lessons)], default=None)
    return [
        lesson
        for lesson in lessons
        if relevance(lesson.similarity, None, best, calibration) >= floor
    ]


def _working_candidates(items: list[WorkingMemoryItem], hits: list[SearchHit]) -> list[Candidate]:
    found = {(h.layer.value, h.id): rank for rank, h in enumerate(hits, 1)}
    candidates = []
    for rank, item in enumerate(items, 1):
        reason = (
            f"working memory #{rank} by attention: attention {item.attention:.2f} "
            f"(importance {item.importance:.2f}, {item.mention_count} mentions)"
        )
        if item.ref_kind is not None:
            reason += f"; refers to {item.ref_kind.value} {item.ref_id}"
            hit_rank = found.get((item.ref_kind.value, item.ref_id or 0))
            if hit_rank:
                reason += f" (search hit #{hit_rank}, not repeated there)"
        candidates.append(Candidate(ItemKind.WORKING_MEMORY, str(item.id), item.content, reason))
    return candidates


def _search_candidates(hits: list[SearchHit], referred: set[tuple[str, Any]]) -> list[Candidate]:
    """The hits working memory does not refer to, each numbered by its rank among all the
    hits: the numbers working memory and the graph facts cite ("search hit #5")."""
    return [
        Candidate(ItemKind(hit.layer.value), str(hit.id), hit.content, explain_hit(rank, hit))
        for rank, hit in enumerate(hits, 1)
        if (hit.layer.value, hit.id) not in referred
    ]


def explain_hit(rank: int, hit: SearchHit) -> str:
    """Why a hit ranked where it did, in the numbers of SPEC §3.7."""
    legs = []
    if hit.vector_rank is not None:
        legs.append(f"vector rank {hit.vector_rank} (similarity {hit.vector_score:.3f})")
    if hit.text_rank is not None:
        legs.append(f"text rank {hit.text_rank} (score {hit.text_score:.3f})")
    if hit.graph_source is not None:
        layer, lender = hit.graph_source
        legs.append(f"graph neighbour of {layer.value.lower()} {lender} (+{hit.graph_boost:.3f})")
    fused = f"{hit.fusion.value.lower()} {hit.fused_score:.5f}"
    reason = f"search #{rank}: {', '.join(legs) or 'no leg'}; {fused}"
    if hit.session_share:
        reason += f"; its session's best +{hit.session_share:.5f}"
    if hit.speaker_boost:
        reason += f"; the query's speaker x{1 + hit.speaker_boost:g}"
    if hit.boost:
        reason += (
            f"; boost {hit.boost:.3f} (session {hit.session_boost:.3f}, "
            f"causal {hit.causal_boost:.3f})"
        )
    reason += f"; final {hit.final_score:.5f}; relevance {hit.relevance:.3f}"
    if (period := hit.interpreted_period) is not None:
        reason += (
            f"; time read from the query: {period.describe()}; period rank "
            f"{_rank(hit.period_rank)}, rank without the period "
            f"{_rank(hit.rank_without_period)}, time score {hit.time_score:.5f}"
        )
    return reason


def _rank(rank: int | None) -> str:
    return "none" if rank is None else str(rank)


def _episode_candidates(lessons: list[EpisodeHit]) -> list[Candidate]:
    candidates = []
    for hit in lessons:
        episode = hit.episode
        verdict = "worked" if episode.reward > 0 else "failed" if episode.reward < 0 else "neutral"
        candidates.append(
            Candidate(
                ItemKind.EPISODE,
                str(episode.id),
                f"{episode.query} → lesson: {episode.reflection} "
                f"(reward {episode.reward:+.2f}, {verdict})",
                f"similar episode: similarity {hit.similarity:.3f} >= "
                f"{DEFAULT_MIN_SIMILARITY:.2f}; reward {episode.reward:+.2f} ({verdict})",
            )
        )
    return candidates
