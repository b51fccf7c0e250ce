"""The statements of hybrid search: the legs of every layer, and the graph statement
(neighbours of the best hits, boosts of every candidate). Builders return SQL text; values
are always bound parameters, only identifiers chosen here are formatted in."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import TextClause
from sqlalchemy import text as sql_text

from gql_memory.memory.search.nearest import nearest_ctes
from gql_memory.memory.search.types import MemoryLayer, When
from gql_memory.memory.validity import valid_sql
from gql_memory.memory.working.decay import ATTENTION_SQL


@dataclass(frozen=True)
class _Layer:
    table: str
    content: str  # SQL expression of the text shown for a hit
    session: str  # SQL expression of the session id (or NULL)
    node_column: str  # nodes.<column> that ties a node to a row of this layer
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
        facts=False,
    ),
}

# The query's lexemes, normalised by the configured text-search configuration: each as a
# tsquery (quoted, so it is taken as it is: no second normalisation), all of them as an array
# and as one OR-ed tsquery.
_QUOTED = r"'''' || replace(replace(l, '\', '\\'), '''', '''''') || ''''"
QUERY_CTE = f"""
query_lexemes AS MATERIALIZED (
    SELECT DISTINCT l AS lexeme, CAST({_QUOTED} AS tsquery) AS q, {_QUOTED} AS quoted
    FROM unnest(tsvector_to_array(to_tsvector(CAST(:tsconfig AS regconfig), :query))) l
),
query_terms AS MATERIALIZED (
    SELECT array_agg(lexeme) AS lexemes, CAST(string_agg(quoted, ' | ') AS tsquery) AS any_lexeme
    FROM query_lexemes
)"""


def _query_words(tsv: str) -> str:
    """The query lexemes ``tsv`` contains, with their positions: the query's lexemes set to
    weight A, then only those kept (two passes in C, whatever the length). Every stored
    tsvector comes from to_tsvector, whose lexemes all have weight D."""
    return f"ts_filter(setweight({tsv}, 'A', qt.lexemes), '{{a}}')"


def text_ctes(layer: MemoryLayer, when: When | bool = False) -> str:
    """The steps of one layer's text leg (see ``text_leg``). Every statistic comes from the
    namespace's own rows, and the rows it ranks are the same whatever plan PostgreSQL picks:
    another tenant's rows change neither.

    ``size`` (built by legs_sql): the namespace's rows, counted up to :count_cap. A small
    namespace (at most :max_matches rows) is ranked whole: ``sample`` is all of it, and
    ``sample_terms`` its rows with their query lexemes, its candidates and its statistics. A
    larger one takes its statistics from its newest :sample_rows (``sample``).

    ``corpus``: how many rows the sample holds and their mean length. ``frequency`` and
    ``weights``: each query lexeme's document frequency in the sample, its BM25 idf and its
    rarity (1 = the rarest).

    In a larger namespace ``steps`` walks the lexemes rarest first (see ``text_leg``). Each
    step takes the lexeme's rows that hold no rarer lexeme, all of them or none: it reads at
    most one row more than the budget left (:max_matches in all), none when the sample says
    they outnumber it, and is complete when they fit. The walk goes on while every step was
    complete and fewer than :rerank rows are taken (``best`` keeps that many, rarest first:
    a later lexeme's rows could not enter it). ``candidates``: the rows of the complete
    steps, and of the lexeme whose rows did not fit its newest, as many as the budget left.
    ``best`` keeps the :rerank found through the rarest lexemes, then holding the most query
    lexemes.
    """
    table = LAYERS[layer].table
    valid = LAYERS[layer].valid("t", when)
    name = layer.value.lower()
    small = f"(SELECT n FROM size_{name}) <= :max_matches"  # size: see legs_sql
    return f"""
sample_{name} AS MATERIALIZED (
    SELECT t.id, t.content_tsv AS tsv, length(t.content_tsv) AS len, {valid} AS visible
    FROM {table} t WHERE t.namespace = :ns
    ORDER BY t.id DESC
    LIMIT CASE WHEN {small} THEN :max_matches ELSE :sample_rows END
),
corpus_{name} AS MATERIALIZED (
    SELECT count(*) AS docs, greatest(CAST(avg(len) AS float8), 1) AS avg_len FROM sample_{name}
),
sample_terms_{name} AS MATERIALIZED (
    -- a small namespace's rows with their query lexemes: its candidates and its statistics
    SELECT s.id, s.len, s.visible, u.lexeme, greatest(cardinality(u.positions), 1) AS tf
    FROM sample_{name} s CROSS JOIN query_terms qt
    CROSS JOIN LATERAL unnest({_query_words("s.tsv")}) u
    WHERE {small} AND s.tsv @@ qt.any_lexeme
),
frequency_{name} AS MATERIALIZED (
    SELECT ql.lexeme, count(st.id) AS df
    FROM query_lexemes ql LEFT JOIN sample_terms_{name} st ON st.lexeme = ql.lexeme
    WHERE {small}
    GROUP BY ql.lexeme
    UNION ALL
    -- a larger one's sample only counts
    SELECT ql.lexeme, (SELECT count(*) FROM sample_{name} s WHERE s.tsv @@ ql.q)
    FROM query_lexemes ql
    WHERE NOT {small}
),
weights_{name} AS MATERIALIZED (
    SELECT ql.lexeme, ql.q, ql.quoted, f.df,
           ln(1 + (c.docs - f.df + 0.5) / (CAST(f.df AS float8) + 0.5)) AS idf,
           row_number() OVER (ORDER BY f.df, ql.lexeme) AS rarity
    FROM query_lexemes ql JOIN frequency_{name} f ON f.lexeme = ql.lexeme
    CROSS JOIN corpus_{name} c
),
walk_{name} AS MATERIALIZED (
    SELECT w.q, w.rarity, w.df,
           (SELECT CAST(string_agg(p.quoted, ' | ') AS tsquery) FROM weights_{name} p
            WHERE p.rarity < w.rarity) AS rarer
    FROM weights_{name} w
    WHERE NOT {small}
),
steps_{name}(rarity, before, taken, ids, tsvs, complete) AS (
    SELECT CAST(0 AS bigint), CAST(0 AS bigint), CAST(0 AS bigint), CAST(ARRAY[] AS bigint[]),
           CAST(ARRAY[] AS tsvector[]), true
    UNION ALL
    -- a lexeme's rows up to one more than the budget left: all of them when they fit (none
    -- read when the sample says they outnumber it: at least df / docs of the rows counted)
    SELECT w.rarity, s.taken, s.taken + f.found, f.ids, f.tsvs, f.found < p.probe
    FROM steps_{name} s JOIN walk_{name} w ON w.rarity = s.rarity + 1
    CROSS JOIN corpus_{name} c
    CROSS JOIN LATERAL (
        SELECT CASE WHEN w.df * (SELECT n FROM size_{name}) <= (:max_matches - s.taken) * c.docs
                    THEN :max_matches - s.taken + 1 ELSE 0 END AS probe
    ) p
    CROSS JOIN LATERAL (
        SELECT count(*) AS found, array_agg(x.id) AS ids, array_agg(x.content_tsv) AS tsvs
        FROM (SELECT t.id, t.content_tsv FROM {table} t
              WHERE t.namespace = :ns AND t.content_tsv @@ w.q
                AND (w.rarer IS NULL OR NOT t.content_tsv @@ w.rarer) AND {valid}
              LIMIT p.probe) x
    ) f
    -- on while every step took all its rows and fewer than best keeps are taken (the rows
    -- of rarer lexemes come first there: a later lexeme's could not enter it)
    WHERE s.complete AND s.taken < :rerank
),
candidates_{name} AS MATERIALIZED (
    SELECT u.id, s.rarity, u.tsv
    FROM steps_{name} s CROSS JOIN LATERAL unnest(s.ids, s.tsvs) u(id, tsv)
    WHERE s.complete AND s.rarity > 0
    UNION ALL
    -- the lexeme whose rows did not fit: its newest rows, as many as the budget left
    SELECT found.id, s.rarity, found.content_tsv
    FROM steps_{name} s JOIN walk_{name} w ON w.rarity = s.rarity
    CROSS JOIN LATERAL (
        SELECT t.id, t.content_tsv FROM {table} t
        WHERE t.namespace = :ns AND t.content_tsv @@ w.q
          AND (w.rarer IS NULL OR NOT t.content_tsv @@ w.rarer) AND {valid}
        ORDER BY t.id DESC
        LIMIT :max_matches - s.before
    ) found
    WHERE NOT s.complete
),
best_{name} AS MATERIALIZED (
    -- the candidates BM25 scores: those found through the rarest lexemes (the highest idf),
    -- then those with the most query lexemes (what ts_delete removes: one call in C per row)
    SELECT c.id, c.tsv
    FROM candidates_{name} c CROSS JOIN query_terms qt
    ORDER BY c.rarity, length(c.tsv) - length(ts_delete(c.tsv, qt.lexemes)) DESC, c.id DESC
    LIMIT :rerank
),
terms_{name} AS MATERIALIZED (
    SELECT id, len, lexeme, tf FROM sample_terms_{name} WHERE visible
    UNION ALL
    SELECT b.id, length(b.tsv), u.lexeme, greatest(cardinality(u.positions), 1)
    FROM best_{name} b CROSS JOIN query_terms qt
    CROSS JOIN LATERAL unnest({_query_words("b.tsv")}) u
)"""


def vector_ctes(layer: MemoryLayer, when: When | bool = False, limit: str = ":n") -> str:
    """The nearest rows valid now (or at :as_of), found as memory/search/nearest.py finds them:
    exactly in a small namespace, through the shared HNSW index in a large one."""
    spec = LAYERS[layer]
    conditions = spec.valid("t", when)
    name = layer.value.lower()
    return nearest_ctes(f"nearest_{name}", spec.table, conditions, limit=limit, size=f"size_{name}")


def vector_leg(layer: MemoryLayer) -> str:
    """The vector leg's rows of ``layer``, nearest first (ties by id)."""
    name = layer.value.lower()
    return f"""
    (SELECT '{layer.value}' AS layer, 'vector' AS leg, id, 1 - distance AS score
     FROM nearest_{name} ORDER BY distance, id)"""


def text_leg(layer: MemoryLayer) -> str:
    """Rows containing any query lexeme (OR semantics), ranked by BM25: each lexeme weighs by
    its rarity in the namespace (idf, from the namespace's own rows: another tenant's words
    never change it), saturated by how often the row repeats it (k1) and normalised by the
    row's length against the namespace's mean (b), so that one rare word in a short turn
    outweighs three common ones scattered through a long answer.

    Ranking reads every candidate row, so at most :max_matches rows are ranked: a namespace
    that small whole, a larger one through its rarest lexemes first (term-at-a-time retrieval
    with a bounded number of accumulators, most informative terms first: Moffat & Zobel's
    "continue" strategy), its statistics from its newest :sample_rows rows. A frequent lexeme
    that finds no rows of its own still scores in every candidate that has it.
    """
    name = layer.value.lower()
    return f"""
    (SELECT '{layer.value}' AS layer, 'text' AS leg, tm.id,
            -- rounded: rows of equal terms and length tie, whatever order the sum took
            round(CAST(sum(w.idf * tm.tf * (p.k1 + 1)
                           / (tm.tf + p.k1 * (1 - p.b + p.b * tm.len / c.avg_len)))
                       AS numeric), 9) AS score
     FROM terms_{name} tm JOIN weights_{name} w ON w.lexeme = tm.lexeme
     CROSS JOIN corpus_{name} c
     CROSS JOIN (SELECT CAST(:bm25_k1 AS float8) AS k1, CAST(:bm25_b AS float8) AS b) p
     GROUP BY tm.id
     ORDER BY score DESC, tm.id DESC
     LIMIT :n)"""


def best_leg(layer: MemoryLayer) -> str:
    """The similarity of ``layer``'s nearest row, as leg ``best``: a layer not searched still
    tells how close the namespace comes to the query (relevance rates hits against it)."""
    name = layer.value.lower()
    return f"""
    (SELECT '{layer.value}' AS layer, 'best' AS leg, id, 1 - distance AS score
     FROM nearest_{name} ORDER BY distance, id LIMIT 1)"""


def legs_sql(
    layers: Iterable[MemoryLayer],
    when: When,
    vector: bool,
    text: bool,
    rated: Iterable[MemoryLayer] = (),
) -> str:
    """Every leg of every layer in one statement: the vector leg with a query vector, the
    text leg when its weight is not 0; rows of each leg in rank order. With a query vector,
    each layer of ``rated`` (not searched) adds its nearest row as leg ``best``."""
    legs, ctes = [], [QUERY_CTE] if text else []
    for layer in layers:
        ctes.append(_size_cte(layer))
        if vector:
            legs.append(vector_leg(layer))
            ctes.append(vector_ctes(layer, when))
        if text:
            legs.append(text_leg(layer))
            ctes.append(text_ctes(layer, when))
    for layer in rated if vector else ():
        # found as the vector leg finds its rows: the cost of a vector leg of one row (in a
        # namespace of a few thousand rows, a scan of them: docs/benchmarks-retrieval.md)
        ctes += [_size_cte(layer), vector_ctes(layer, when, limit="1")]
        legs.append(best_leg(layer))
    return "WITH RECURSIVE " + ",".join(ctes) + "\n" + "\nUNION ALL".join(legs)


def _size_cte(layer: MemoryLayer) -> str:
    """One count of the namespace's rows for both legs (an index-only scan of the key)."""
    return f"""
size_{layer.value.lower()} AS MATERIALIZED (
    SELECT count(*) AS n FROM (SELECT 1 FROM {LAYERS[layer].table} WHERE namespace = :ns
                               LIMIT :count_cap) x
)"""


# The conversation session and speaker of raw turns among a search's candidates (by key).
RAW_FACETS_SQL = """
SELECT id, session_id, speaker FROM raw_dialogue WHERE namespace = :ns AND id = ANY(:ids)
"""
# The same, with how near the valid digest (consolidation) of each one's session is the query.
RAW_FACETS_DIGESTS_SQL = """
SELECT r.id, r.session_id, r.speaker, d.similarity
FROM raw_dialogue r
LEFT JOIN LATERAL (
    SELECT max(1 - (i.embedding <=> CAST(:vector AS vector))) AS similarity FROM insights i
    WHERE i.namespace = :ns AND i.digest_of = r.session_id AND i.valid_to IS NULL
      AND i.embedding IS NOT NULL
) d ON true
WHERE r.namespace = :ns AND r.id = ANY(:ids)
"""


def content_sql(layers: Iterable[MemoryLayer], vector: bool = False) -> str:
    """What the final hits show, for the hits of ``layers``: their text, session, validity and
    (a raw turn's) time (:ids_<layer> per layer), and with a query vector (:vector) their
    cosine similarity."""
    chosen = set(layers)
    cosine = "1 - (embedding <=> CAST(:vector AS vector))" if vector else "CAST(NULL AS float8)"
    return " UNION ALL ".join(
        f"SELECT '{layer.value}' AS layer, id, {spec.content} AS content, "
        f"{spec.session} AS session_id, "
        + (
            "valid_from, valid_to, superseded_by, CAST(NULL AS timestamptz) AS happened "
            if spec.facts
            else "CAST(NULL AS timestamptz), CAST(NULL AS timestamptz), CAST(NULL AS bigint), "
            '"timestamp" AS happened '
        )
        + f", {cosine} AS cosine FROM {spec.table} "
        f"WHERE namespace = :ns AND id = ANY(:ids_{layer.value.lower()})"
        for layer, spec in LAYERS.items()
        if layer in chosen
    )


def _short_turn(layer: MemoryLayer, content_sql: str) -> str:
    """The condition that a raw turn, whose content is ``content_sql``, is short enough to
    lend or borrow (:lend_max_chars, 0: any); nothing for the other layers."""
    if layer is not MemoryLayer.RAW:
        return ""
    return f" AND (:lend_max_chars = 0 OR char_length({content_sql}) <= :lend_max_chars)"


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
        + _short_turn(
            layer,
            "(SELECT r.content FROM raw_dialogue r WHERE r.namespace = :ns AND r.id = l.id)",
        )
        for layer in chosen
    )
    neighbour_memories = "\n        UNION ALL ".join(
        f"SELECT '{layer.value}' AS layer, n.{LAYERS[layer].node_column} AS id, "
        f"h.lender_layer, h.lender_id, h.score FROM hop h JOIN nodes n ON n.id = h.node_id "
        f"JOIN {LAYERS[layer].table} m ON m.namespace = :ns "
        f"AND m.id = n.{LAYERS[layer].node_column} AND {LAYERS[layer].valid('m', when)} "
        f"WHERE n.namespace = :ns AND n.{LAYERS[layer].node_column} IS NOT NULL"
        f"{_short_turn(layer, 'm.content')}"
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


@functools.lru_cache(maxsize=256)
def statement(sql: str) -> TextClause:
    """The parsed statement of a built SQL text (a search's statements are a few dozen
    shapes: layers, legs and time filters), parsed once instead of on every search."""
    return sql_text(sql)
