"""The vocabulary every step of a search shares: the layers, the instant and period a search
sees, the legs' weights and fusion, the period read from a query, a candidate while it is
ranked and the hit it becomes. Every step imports this module; it imports no step."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime, timedelta


class MemoryLayer(enum.Enum):
    """A searchable memory layer."""

    INSIGHT = "INSIGHT"
    EPISODE = "EPISODE"
    RAW = "RAW"


LAYER_BY_NAME = {layer.value: layer for layer in MemoryLayer}  # a row's layer name: its member


@dataclass(frozen=True)
class When:
    """Which instant a search sees (now, or :as_of) and the period it is limited to."""

    as_of: bool = False
    since: bool = False
    until: bool = False


class Fusion(enum.Enum):
    """How the legs' candidates are fused into one ranking."""

    DBSF = "DBSF"  # distribution-based score fusion: each leg's scores standardized
    RRF = "RRF"  # reciprocal rank fusion: ranks only


@dataclass(frozen=True)
class SearchWeights:
    """Weight of each leg in the fusion; a zero weight switches the leg off. A leg left None
    takes the operator's weight (GQL_MEMORY_SEARCH_VECTOR_WEIGHT / _TEXT_WEIGHT)."""

    vector: float | None = None
    text: float | None = None


@dataclass(frozen=True)
class QueryPeriod:
    """The period read from a query: ``expression`` as written, the ``granularity`` it names,
    [``start``, ``end``) in the reference time's timezone, and ``until``: ``end`` plus the
    window after it in which turns about the period are still searched."""

    expression: str
    granularity: str
    start: datetime
    end: datetime
    until: datetime

    def describe(self) -> str:
        """E.g. ``"last week" = 2023-10-09 to 2023-10-15, and 7 days after``."""
        last = self.end - timedelta(microseconds=1)
        days = f"{self.start:%Y-%m-%d}" + (
            "" if last.date() == self.start.date() else f" to {last:%Y-%m-%d}"
        )
        after = (self.until - self.end).days
        return f'"{self.expression}" = {days}' + (f", and {after} days after" if after else "")


@dataclass(frozen=True)
class SearchRequest:
    """A validated search (memory/search/request.py): every argument checked, every default
    taken from the settings."""

    query: str
    top_k: int
    session_id: str | None
    layers: list[MemoryLayer]
    weights: SearchWeights  # both legs' weights, resolved
    fusion: Fusion
    as_of: datetime | None
    since: datetime | None
    until: datetime | None
    # the instant relative expressions are read against (default as_of, else now)
    reference_time: datetime | None
    interpret_time: bool
    min_relevance: float  # the floor: hits below it are left out

    @property
    def limited(self) -> bool:
        """The caller limited the search to a period (since / until)."""
        return self.since is not None or self.until is not None


@dataclass(slots=True)
class Candidate:
    """A hit while it is being ranked: mutable and cheap, so that the dozens of candidates
    of a search cost no frozen copies; only the final topK become ``SearchHit``s."""

    layer: MemoryLayer
    id: int
    ranks: dict[str, int] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    fused_score: float = 0.0
    rrf_score: float = 0.0
    session_share: float = 0.0
    speaker_boost: float = 0.0
    graph_boost: float = 0.0
    graph_source: tuple[MemoryLayer, int] | None = None
    session_boost: float = 0.0
    causal_boost: float = 0.0
    boost: float = 0.0
    final_score: float = 0.0

    @property
    def lending_score(self) -> float:
        """What the hit is worth before the graph: fused, plus its session's share."""
        return self.fused_score + self.session_share


@dataclass(frozen=True)
class SearchHit:
    """A ranked hit with every number that explains its rank."""

    layer: MemoryLayer
    id: int
    content: str = ""
    session_id: str | None = None
    vector_rank: int | None = None
    text_rank: int | None = None
    vector_score: float | None = None
    text_score: float | None = None
    fusion: Fusion = Fusion.DBSF
    fused_score: float = 0.0
    rrf_score: float = 0.0
    # a raw turn's share of the best fused score in its conversation session
    session_share: float = 0.0
    # the factor's part above 1 a raw turn gets when the query names its speaker
    speaker_boost: float = 0.0
    graph_boost: float = 0.0
    graph_source: tuple[MemoryLayer, int] | None = None
    # validity of an insight or episode hit: a hit with valid_to was found as of an instant
    # before it was superseded, and a search of now would have filtered it out
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    superseded_by: int | None = None
    # when a raw turn happened (None for insights and episodes: they have their validity)
    timestamp: datetime | None = None
    session_boost: float = 0.0
    causal_boost: float = 0.0
    boost: float = 0.0
    final_score: float = 0.0
    # with a period read from the query (interpretTime): the period, the hit's rank in the
    # search without it and among the hits in it, and the time score hits sort by
    # (memory/search/period_ranking.py)
    interpreted_period: QueryPeriod | None = None
    rank_without_period: int | None = None
    period_rank: int | None = None
    time_score: float | None = None
    # the hit's cosine similarity with the query (None: no query vector, or the row has none)
    cosine: float | None = None
    # the chance that the hit answers the query, calibrated (memory/search/relevance.py), and
    # the query's bests it is rated against: the best cosine in the namespace, the best text
    # score among the search's candidates
    relevance: float = 0.0
    best_cosine: float | None = None
    best_text_score: float | None = None
    # why the vector leg was not searched although asked for (the embedder is down): the
    # hits come from the text leg alone, their relevance from the text signal alone
    vector_leg_skipped: str | None = None
