"""The statements of hybrid search: the legs of every layer, and the graph statement
(neighbours of the best hits, boosts of every candidate). Builders return SQL text; values
are always bound parameters, only identifiers chosen here are formatted in."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from gql_memory.memory.decay import ATTENTION_SQL
from gql_memory.memory.validity import valid_sql


class MemoryLayer(enum.Enum):
    """A searchable memory layer."""

    INSIGHT = "INSIGHT"
    EPISODE = "EPISODE"
    RAW = "RAW"


@dataclass(frozen=True)
class _Layer:
    table: str
    content: str  # SQL expression of the text shown for a hit
    session: str  # SQL expression of the session id (or NULL)
    node_column: str  # nodes.<column> that ties a node to a row of this layer
    extra_where: str = ""
    facts: bool = True  # rows have a validity interval (raw turns are events: they don't)

    def valid(self, alias: str, when: When | bool) -> str:
        """The condition that row ``alias`` is in the world now, or as of :as_of: a fact valid
        then, a raw turn stored by then; and, within a period (:since .. :until), a turn that
        happened in it or a fact valid during some of it."""
        when = when if isinstance(when, When) else When(as_of=when)
        if not self.facts:
            conditions = [f"{alias}.timestamp <= :as_of"] if when.as_of else []
            if when.since:
                conditions.append(f"{alias}.timestamp >= :since")
            if when.until:
                conditions.append(f"{alias}.timestamp <= :until")
            return " AND ".join(conditions) or "true"
        conditions = [valid_sql(alias, when.as_of)]
        if when.since:
            conditions.append(f"({alias}.valid_to IS NULL OR {alias}.valid_to > :since)")
        if when.until:
            conditions.append(f"{alias}.valid_from <= :until")
        return " AND ".join(conditions)


@dataclass(frozen=True)
class When:
    """Which instant a search sees (now, or :as_of) and the period it is limited to."""

    as_of: bool = False
    since: bool = False
    until: bool = False


LAYERS: dict[MemoryLayer, _Layer] = {
    MemoryLayer.INSIGHT: _Layer("insights", "content", "CAST(NULL AS text)", "insight_id"),
    MemoryLayer.EPISODE: _Layer(
        "episodes", "query || ' — ' || reflection", "CAST(NULL AS text)", "episode_id"
    ),
    MemoryLayer.RAW: _Layer(
        "raw_dialogue",
        "speaker || ': ' || content",
        "session_id",
        "raw_id",
        " AND embedding IS NOT NULL",
        facts=False,
    ),
}

# The query's lexemes, normalised by the configured text-search configuration.
QUERY_CTE = """
query_lexemes AS (
    SELECT DISTINCT l AS lexeme
    FROM unnest(tsvector_to_array(to_tsvector(CAST(:tsconfig AS regconfig), :query))) l
)"""
# A lexeme as tsquery text: quoted, so it is taken as it is (no second normalisation).
_QUOTED = r"'''' || replace(replace(ql.lexeme, '\', '\\'), '''', '''''') || ''''"


def text_ctes(layer: MemoryLayer, when: When | bool = False) -> str:
    """The steps of one layer's text leg (see ``text_leg``).

    ``stats``: PostgreSQL's own statistics of the tsvector column (pg_stats.most_common_elems,
    kept fresh by autovacuum's ANALYZE; read through gql_memory_lexeme_stats of migration 0007,
    because pg_stats hides the statistics of tables under row-level security from their
    readers) and the table's row count. ``lexemes``: each query lexeme as a tsquery.
    ``ranked``: the lexemes with the estimated length of their posting lists, numbered rarest
    first (a lexeme the statistics do not list is rarer than any they do). ``walk``: the
    lexemes that find candidates — the rarest always, then every one whose posting list is
    no longer than the budget — each with the OR of the ones before it, so that a row is
    found once, through its rarest lexeme.
    ``small``: whether the namespace has no more rows than the budget. ``candidates``: the
    rows of a small namespace that contain any query lexeme (the statistics are not read
    then), else the rows of the walk's lexemes in rarity order, until the budget is spent.
    ``best``: the best :rerank candidates by coverage.
    """
    table = LAYERS[layer].table
    valid = LAYERS[layer].valid("t", when)
    name = layer.value.lower()
    frequency = "coalesce(st.freqs[array_position(st.elems, lx.lexeme)], 0)"
    return f"""
stats_{name} AS MATERIALIZED (
    -- reltuples is -1 until the table was first analyzed: then every lexeme is walked
    SELECT st.elems, st.freqs, greatest(c.reltuples, 0) AS table_rows
    FROM pg_class c LEFT JOIN gql_memory_lexeme_stats('{table}') st ON true
    WHERE c.oid = CAST('{table}' AS regclass)
),
lexemes_{name} AS MATERIALIZED (
    SELECT ql.lexeme, CAST({_QUOTED} AS tsquery) AS q, {_QUOTED} AS quoted
    FROM query_lexemes ql
),
ranked_{name} AS MATERIALIZED (
    SELECT lx.q, lx.quoted, {frequency} * st.table_rows AS postings,
           row_number() OVER (ORDER BY {frequency}, lx.lexeme) AS rarity
    FROM lexemes_{name} lx LEFT JOIN stats_{name} st ON true
),
walk_{name} AS MATERIALIZED (
    SELECT lx.q,
           (SELECT CAST(string_agg(r.quoted, ' | ') AS tsquery) FROM ranked_{name} r
            WHERE r.rarity < lx.rarity) AS rarer
    FROM ranked_{name} lx
    WHERE lx.rarity = 1 OR lx.postings <= :max_matches
    ORDER BY lx.rarity
),
match_{name} AS MATERIALIZED (
    SELECT array_agg(lexeme) AS lexemes,
           CAST(string_agg(quoted, ' | ') AS tsquery) AS any_lexeme
    FROM lexemes_{name}
),
small_{name} AS MATERIALIZED (
    SELECT count(*) <= :max_matches AS small
    FROM (SELECT 1 FROM {table} WHERE namespace = :ns LIMIT :max_matches + 1) x
),
candidates_{name} AS MATERIALIZED (
    -- the walk reads its lexemes in the order it lists them and stops at the budget
    (SELECT found.id, found.content_tsv
     FROM walk_{name} w
     CROSS JOIN LATERAL (
         SELECT t.id, t.content_tsv FROM {table} t
         WHERE t.namespace = :ns AND t.content_tsv @@ w.q
           AND (w.rarer IS NULL OR NOT t.content_tsv @@ w.rarer) AND {valid}
     ) found
     WHERE NOT (SELECT small FROM small_{name})
     LIMIT :max_matches)
    UNION ALL
    SELECT t.id, t.content_tsv FROM {table} t
    WHERE (SELECT small FROM small_{name}) AND t.namespace = :ns AND {valid}
      AND t.content_tsv @@ (SELECT any_lexeme FROM match_{name})
),
best_{name} AS MATERIALIZED (
    -- coverage: the distinct query lexemes a row contains, i.e. those ts_delete removes
    SELECT c.id, c.content_tsv,
           length(c.content_tsv) - length(ts_delete(c.content_tsv, mt.lexemes)) AS coverage
    FROM candidates_{name} c, match_{name} mt
    ORDER BY coverage DESC, c.id DESC
    LIMIT :rerank
)"""


def vector_leg(layer: MemoryLayer, when: When | bool = False) -> str:
    """The nearest rows valid now (or at :as_of); the validity test filters during the HNSW
    index scan (iterative scans go on until enough rows pass)."""
    spec = LAYERS[layer]
    return f"""
    (SELECT '{layer.value}' AS layer, 'vector' AS leg, id,
            1 - (embedding <=> CAST(:vector AS vector)) AS score
     FROM {spec.table}
     WHERE namespace = :ns{spec.extra_where} AND {spec.valid(spec.table, when)}
     ORDER BY embedding <=> CAST(:vector AS vector)
     LIMIT :n)"""


def text_leg(layer: MemoryLayer) -> str:
    """Rows containing any query lexeme (OR semantics), ranked by coverage — how many distinct
    query lexemes a row contains — then cover density (ts_rank_cd, normalised to 0..1).

    Ranking reads every candidate row, so at most :max_matches rows are ranked. A namespace
    that small is ranked whole. In a larger one, the candidates are the rows found through
    the rarest query lexemes, until the budget is spent: term-at-a-time retrieval with a
    limited number of accumulators, most informative terms first (Moffat & Zobel's "continue"
    strategy). A lexeme whose posting list alone is longer than the budget finds no rows
    (reading it would cost its whole list for an arbitrary sample) unless it is the query's
    rarest; like every lexeme it still counts in each candidate's coverage and cover density,
    as low-impact terms in BM25/WAND engines only re-rank what the others found. Statistics
    choose which rows are ranked, never a row's score.

    ts_rank_cd is the costly part. A row's score lies in [coverage, coverage + 1), so only
    rows whose coverage reaches that of the :n-th best can be among the :n best: it scores
    only those. And its cost grows with the size of the query, while the words of an OR
    query that a row lacks never start nor end a cover: it ranks each row against the query
    words the row contains, the same number for a fraction of the work.
    """
    name = layer.value.lower()
    return f"""
    (SELECT '{layer.value}' AS layer, 'text' AS leg, b.id,
            b.coverage + ts_rank_cd(
                b.content_tsv,
                (SELECT CAST(string_agg(lx.quoted, ' | ') AS tsquery) FROM lexemes_{name} lx
                 WHERE b.content_tsv @@ lx.q),
                32) AS score
     FROM best_{name} b
     WHERE b.coverage > 0
       AND b.coverage >= (SELECT min(coverage) FROM (SELECT coverage FROM best_{name}
                                                     ORDER BY coverage DESC LIMIT :n) top_n)
     ORDER BY score DESC, b.id DESC
     LIMIT :n)"""


def legs_sql(layers: Iterable[MemoryLayer], when: When, vector: bool, text: bool) -> str:
    """Every leg of every layer in one statement: the vector leg with a query vector, the
    text leg when its weight is not 0; rows of each leg in rank order."""
    legs, ctes = [], [QUERY_CTE]
    for layer in layers:
        if vector:
            legs.append(vector_leg(layer, when))
        if text:
            legs.append(text_leg(layer))
            ctes.append(text_ctes(layer, when))
    return "WITH " + ",".join(ctes) + "\n" + "\nUNION ALL".join(legs)


def content_sql(layers: Iterable[MemoryLayer]) -> str:
    """What the final hits show, for the hits of ``layers``: their text, session and validity
    (:ids_<layer> per layer)."""
    chosen = set(layers)
    return " UNION ALL ".join(
        f"SELECT '{layer.value}' AS layer, id, {spec.content} AS content, "
        f"{spec.session} AS session_id, "
        + (
            "valid_from, valid_to, superseded_by "
            if spec.facts
            else "CAST(NULL AS timestamptz), CAST(NULL AS timestamptz), CAST(NULL AS bigint) "
        )
        + f"FROM {spec.table} "
        f"WHERE namespace = :ns AND id = ANY(:ids_{layer.value.lower()})"
        for layer, spec in LAYERS.items()
        if layer in chosen
    )


def graph_sql(layers: Iterable[MemoryLayer], when: When | bool = False) -> str:
    """Neighbours of the best hits and the boosts of every candidate, in one statement.

    ``lenders`` are the best fused hits; each lends to the memories whose nodes are one edge
    from one of its nodes (a raw turn's previous and next turns, an insight's source turns,
    any edge a client drew between memories). ``cand`` (the fused candidates plus those
    neighbours) get their session attention and their hop distance from the session's seeds.
    Only edges and memories valid now (or at :as_of) take part: a superseded fact never comes
    back as a neighbour.
    """
    chosen = list(layers)
    when = when if isinstance(when, When) else When(as_of=when)
    edge = valid_sql("e", when.as_of)

    lender_nodes = "\n        UNION ALL ".join(
        f"SELECT l.layer, l.id, l.score, n.id AS node_id FROM lenders l JOIN nodes n "
        f"ON n.{LAYERS[layer].node_column} = l.id "
        f"WHERE l.layer = '{layer.value}' AND n.namespace = :ns "
        f"AND n.{LAYERS[layer].node_column} IS NOT NULL"
        for layer in chosen
    )
    neighbour_memories = "\n        UNION ALL ".join(
        f"SELECT '{layer.value}' AS layer, n.{LAYERS[layer].node_column} AS id, "
        f"h.lender_layer, h.lender_id, h.score FROM hop h JOIN nodes n ON n.id = h.node_id "
        f"JOIN {LAYERS[layer].table} m ON m.namespace = :ns "
        f"AND m.id = n.{LAYERS[layer].node_column} AND {LAYERS[layer].valid('m', when)} "
        f"WHERE n.namespace = :ns AND n.{LAYERS[layer].node_column} IS NOT NULL"
        for layer in chosen
    )
    hit_nodes = "\n        UNION ALL ".join(
        f"SELECT c.layer, c.id, n.id AS node_id FROM cand c JOIN nodes n "
        f"ON n.{LAYERS[layer].node_column} = c.id "
        f"WHERE c.layer = '{layer.value}' AND n.namespace = :ns "
        f"AND n.{LAYERS[layer].node_column} IS NOT NULL"
        for layer in chosen
    )
    seed_links = "\n        UNION ".join(
        f"SELECT n.id FROM nodes n JOIN wm ON wm.ref_kind = '{layer.value}' "
        f"AND n.{spec.node_column} = wm.ref_id WHERE n.namespace = :ns"
        for layer, spec in LAYERS.items()
    )
    return f"""
    -- MATERIALIZED: each step is small and must run in this order, whatever the planner's
    -- statistics say (right after a bulk import they say every table is empty)
    WITH lenders AS MATERIALIZED (
        SELECT * FROM unnest(CAST(:lender_layers AS text[]), CAST(:lender_ids AS bigint[]),
                             CAST(:lender_scores AS float8[])) AS l(layer, id, score)
    ),
    lender_nodes AS MATERIALIZED (
        {lender_nodes}
    ),
    -- one hop in either direction, at most :fanout edges per lending node (hubs stay cheap)
    hop AS MATERIALIZED (
        SELECT ln.layer AS lender_layer, ln.id AS lender_id, ln.score, x.node_id
        FROM lender_nodes ln
        CROSS JOIN LATERAL (
            (SELECT e.target_id AS node_id FROM edges e
             WHERE e.namespace = :ns AND e.source_id = ln.node_id AND {edge} LIMIT :fanout)
            UNION ALL
            (SELECT e.source_id FROM edges e
             WHERE e.namespace = :ns AND e.target_id = ln.node_id AND {edge} LIMIT :fanout)
        ) x
    ),
    neighbours AS MATERIALIZED (
        {neighbour_memories}
    ),
    cand AS (
        SELECT * FROM unnest(CAST(:layers AS text[]), CAST(:ids AS bigint[])) AS c(layer, id)
        UNION
        SELECT layer, id FROM neighbours
    ),
    wm AS (
        SELECT w.ref_kind, w.ref_id, {ATTENTION_SQL} AS attention
        FROM working_memory w
        LEFT JOIN session_state s ON s.namespace = w.namespace AND s.session_id = w.session_id
        WHERE w.namespace = :ns AND w.session_id = :sid AND w.ref_kind IS NOT NULL
    ),
    seeds AS (
        SELECT n.id FROM nodes n JOIN wm ON wm.ref_kind = 'NODE' AND n.id = wm.ref_id
        WHERE n.namespace = :ns
        UNION {seed_links}
    ),
    -- nodes one and two hops from a seed, remembering the seed (origin) they came from,
    -- so that a seed is not "two hops from itself" through a neighbour and back
    hop1 AS (
        SELECT e.target_id AS id, seeds.id AS origin FROM edges e
        JOIN seeds ON e.source_id = seeds.id WHERE e.namespace = :ns AND {edge}
        UNION SELECT e.source_id, seeds.id FROM edges e
        JOIN seeds ON e.target_id = seeds.id WHERE e.namespace = :ns AND {edge}
    ),
    hop2 AS MATERIALIZED (
        SELECT e.target_id AS id, hop1.origin FROM edges e
        JOIN hop1 ON e.source_id = hop1.id WHERE e.namespace = :ns AND {edge}
        UNION SELECT e.source_id, hop1.origin FROM edges e
        JOIN hop1 ON e.target_id = hop1.id WHERE e.namespace = :ns AND {edge}
    ),
    distance AS MATERIALIZED (
        SELECT id, min(d) AS d FROM (
            SELECT id, 1 AS d FROM hop1
            UNION ALL SELECT id, 2 FROM hop2 WHERE id <> origin
        ) x GROUP BY id
    ),
    hit_nodes AS (
        {hit_nodes}
    )
    SELECT 'boost' AS kind, c.layer, c.id, NULL AS lender_layer, CAST(NULL AS bigint) AS lender_id,
           CAST(NULL AS float8) AS score,
           greatest(
               (SELECT max(wm.attention) FROM wm
                WHERE wm.ref_kind = c.layer AND wm.ref_id = c.id),
               (SELECT max(wm.attention) FROM wm JOIN hit_nodes h
                  ON wm.ref_kind = 'NODE' AND wm.ref_id = h.node_id
                WHERE h.layer = c.layer AND h.id = c.id)
           ) AS attention,
           (SELECT min(d.d) FROM hit_nodes h JOIN distance d ON d.id = h.node_id
            WHERE h.layer = c.layer AND h.id = c.id) AS hops
    FROM cand c
    UNION ALL
    SELECT 'lend', layer, id, lender_layer, lender_id, score, NULL, NULL FROM neighbours
    """
