"""Search and retrieval (ADR-002): full-text indexing and query limits, the fusion of the
legs, graph propagation, the bounded boosts, relevance floors, time expressions, and the
size of the texts that are embedded."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gql_memory.config.embeddings import EMBEDDING_WINDOW_TOKENS

# PostgreSQL refuses tsvectors over 1 MB: full-text indexing reads at most this much of a text.
TSV_MAX_CHARS = 200_000
# Search questions (and episode queries) longer than this are refused: a query, not a document.
MAX_QUERY_CHARS = 10_000
# A search with interpretTime reads time expressions in at most this many characters of its
# query (cut at a space): dateparser's search grows with the text, ~1 ms a character at worst.
TIME_READ_MAX_CHARS = 300
# ... and is searched without a period when those hold more numbers than this: a time
# expression names a few (day, month, year, a time of day), and dateparser's work grows
# fastest with them ("1 2 3 ... 100" cost a second). Refused before any parsing.
TIME_READ_MAX_NUMBERS = 8
# Time is read in worker processes (dateparser is pure Python: in a thread it would take the
# event loop's GIL), at most this many at once; as many more readings may wait for one to be
# free, each for up to TIME_READ_WAIT_MS (an ordinary reading takes 2-10 ms of CPU). Any
# further reading is not queued: its query is searched without a period, at once.
TIME_READERS = 2
TIME_READ_WAIT_MS = 10
# Readers run at this nice level: when the server, PostgreSQL and a reader all want the CPU,
# serving comes first (a reading is an optional refinement of a search, the search is not).
TIME_READER_NICE = 10
# The ceiling is CPU time, stopped inside the reader; a reader that has not answered after
# this many times the ceiling in wall time, and at least TIME_READ_KILL_AFTER_MIN_S (starved
# of CPU on a busy machine, or stuck in C code the CPU timer cannot interrupt), is killed and
# replaced. The floor keeps a reader that is merely waiting for a core from being killed.
TIME_READ_KILL_AFTER_CEILINGS = 20
TIME_READ_KILL_AFTER_MIN_S = 2.0
# The query cost of a search or context that reads time in its query (interpretTime, or
# GQL_MEMORY_SEARCH_INTERPRET_TIME): up to a ceiling of parsing, charged whether or not the
# query names a time, like a page of GQL_MEMORY_DEFAULT_PAGE_SIZE objects.
TIME_READING_COST = 100
# With a period read from the query, the search without it and the search within it each
# rank at least this many hits before their rankings are fused (measured on LoCoMo: 20 finds
# what 50 does at R@10, 10 a point less).
TIME_RANKING_DEPTH = 20
# memory://l0-raw refuses a date_range spanning more days than a (leap) year (seed 003's size
# limit "date ranges <= 1 year").
MAX_DATE_RANGE_DAYS = 366


class SearchSettings:
    """Settings of hybrid search and retrieval (part of ``Settings``)."""

    # hybrid search (ADR-002): fusion of the legs, graph propagation, bounded boosts
    # Defaults measured on the LoCoMo dev split (docs/benchmarks.md, "Retrieval quality").
    search_fusion: Literal["dbsf", "rrf"] = Field(
        default="dbsf",
        description="dbsf: distribution-based score fusion (each leg's scores standardized, "
        "weighted sum); rrf: reciprocal rank fusion (weight / (k + rank)).",
    )
    rrf_k: int = Field(default=60, ge=1, description="Reciprocal Rank Fusion constant k.")
    search_vector_weight: float = Field(
        default=0.5, ge=0.0, description="Fusion weight of the vector leg."
    )
    search_text_weight: float = Field(
        default=0.5, ge=0.0, description="Fusion weight of the full-text leg."
    )
    graph_propagation: float = Field(
        default=0.25,
        ge=0.0,
        le=1.0,
        description="Share of its fused score each of the top-k hits lends to its one-hop "
        "graph neighbours (graphBoost); 0 switches graph propagation off.",
    )
    graph_propagation_lenders: int = Field(
        default=10,
        ge=1,
        le=100,
        description="How many of the best fused hits lend to their graph neighbours.",
    )
    graph_propagation_max_chars: int = Field(
        default=600,
        ge=0,
        description="A raw turn longer than this many characters neither lends nor borrows "
        "in graph propagation: a short reply needs the turns around it, a long turn (an "
        "assistant's answer) has its own subject; 0: every turn.",
    )
    search_session_share: float = Field(
        default=0.2,
        ge=0.0,
        le=1.0,
        description="Hierarchical retrieval over raw turns: each turn gains this share of the "
        "best fused score among the candidates of its conversation session (sessionShare), so "
        "that the session that answers best lifts its other turns; 0 switches it off.",
    )
    search_digest_share: float = Field(
        default=0.2,
        ge=0.0,
        le=1.0,
        description="Within sessionShare, the raw turns of the candidate session whose digest "
        "(written by consolidation) is nearest the query gain this share of the best fused "
        "score (the farthest digest nothing, the others in between); chosen on both retrieval "
        "dev splits with digests present (LoCoMo R@5/R@10 73.3/80.0 -> 74.0/80.6, "
        "LongMemEval 62.8/81.7 -> 65.6/81.7); 0: off. Without digests it changes nothing.",
    )
    search_min_relevance: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="The relevance below which search leaves a hit out when the call gives no "
        "minRelevance; 0: every hit, as ranked (a search returns topK hits).",
    )
    context_min_relevance: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="The relevance below which context adds no search hit or lesson when the call "
        "gives no minRelevance; unset: the floor calibrated with the embedding model (0.005 "
        "for multilingual-e5-small), 0 for a model without a calibration.",
    )
    search_speaker_boost: float = Field(
        default=1.0,
        ge=0.0,
        le=2.0,
        description='When the query names one speaker of the candidate raw turns ("What does '
        "Caroline paint?\"), that speaker's turns score 1 + this times as much (speakerBoost; "
        "the default counts them twice): what a person does is told in their own turns; 0 "
        "switches it off.",
    )
    search_asker_speaker: str = Field(
        default="user",
        max_length=50,
        description="The speaker who asks in the first person: a query that says I or my (not "
        "only me: 'Tell me about Paris' asks the assistant), not you or we, and names no "
        'speaker names this one for speakerBoost ("What brand of shampoo do I use?" is '
        "answered in the user's own turns, not in the assistant's long replies). Matched in "
        "any case; empty: off.",
    )
    contradiction_similarity: float = Field(
        default=0.85,
        ge=0.0,
        le=1.0,
        description="Cosine similarity from which a valid insight is listed as one a new "
        "insight possiblyContradicts (a hint only; nothing is superseded automatically).",
    )
    mcp_search_nodes_min_similarity: float = Field(
        default=0.85,
        ge=0.0,
        le=1.0,
        description="The MCP search_nodes tool: besides the reference server's substring "
        "matches, the entities with an observation among the hybrid-search hits that the "
        "full-text leg matched or the vector leg found at least this similar (cosine).",
    )
    graph_propagation_fanout: int = Field(
        default=50,
        ge=1,
        le=1000,
        description="Edges followed per node and direction when lending (bounds hub nodes).",
    )
    session_boost: bool = Field(
        default=True,
        description="ADR-002's rollback switch: off, search applies no sessionBoost.",
    )
    causal_boost: bool = Field(
        default=True,
        description="ADR-002's rollback switch: off, search applies no causalBoost.",
    )
    session_boost_factor: float = Field(
        default=0.15, ge=0.0, description="sessionBoost = this x attention of the referring item."
    )
    causal_boost_one_hop: float = Field(default=0.10, ge=0.0)
    causal_boost_two_hops: float = Field(default=0.05, ge=0.0)
    boost_cap: float = Field(
        default=0.20, ge=0.0, le=1.0, description="Hard cap of sessionBoost + causalBoost."
    )
    text_search_max_matches: int = Field(
        default=1000,
        ge=100,
        description="At most this many full-text matches are ranked per layer and search: "
        "a namespace this small is ranked whole, a larger one through its rarest query "
        "lexemes first. Also the size of the sample a larger namespace's word statistics "
        "come from (its newest rows).",
    )
    text_search_bm25_k1: float = Field(
        default=0.6,
        ge=0,
        le=10,
        description="BM25's term-frequency saturation for the text leg (0: a word counts "
        "once however often a row repeats it).",
    )
    text_search_bm25_b: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="BM25's length normalisation for the text leg (0: none, 1: full): a "
        "long row's matches weigh less than a short row's.",
    )
    search_max_query_words: int = Field(
        default=128,
        ge=8,
        le=2000,
        description="A search query (search, context, insightSearch, similarEpisodes) with "
        "more distinct words than this is refused with BAD_USER_INPUT: the text leg's work "
        "grows with them.",
    )
    search_interpret_time: bool = Field(
        default=False,
        description='search and context read time expressions in the query ("last week", '
        '"in May 2023") into a period when the call does not say (interpretTime).',
    )
    search_time_read_ceiling_ms: int = Field(
        default=50,
        ge=1,
        le=10_000,
        description="With interpretTime, the CPU time reading the time expressions of one "
        "query may take (dateparser, in a worker process; an ordinary question takes a few "
        "ms). A query over it is searched without a period, and says why (periodNotRead, "
        "the context's notes).",
    )
    search_time_window_days: int = Field(
        default=7,
        ge=0,
        le=366,
        description="With interpretTime, the period read from the query has a tail of this "
        "many days past its end (never past the reference time), whose hits rank after the "
        "period's and before the rest: turns about an event come after it (\"last week I "
        '..."). Chosen on the LoCoMo dev split (0, 7, 14, 21, 30 measured).',
    )
    vector_exact_max_rows: int = Field(
        default=5000,
        ge=0,
        description="A namespace with at most this many rows in a layer is searched exactly "
        "(every distance, no index): its hits never depend on other tenants' rows. A larger "
        "one walks the shared HNSW index, and is searched exactly when the walk comes back "
        "short.",
    )
    embedding_max_chars: int = Field(
        default=100_000,
        ge=100,
        description="A longer text is refused (BAD_USER_INPUT) instead of embedded; shorter "
        "ones are embedded whole, in overlapping windows when longer than the model reads.",
    )
    embedding_window_tokens: int = Field(
        default=EMBEDDING_WINDOW_TOKENS,
        ge=128,
        le=1_000_000,
        description="Tokens the embedding server's model reads in one pass (prefix and "
        "special tokens included); longer texts are embedded in overlapping chunks. The "
        "local e5 model counts its own (512).",
    )
