"""The legs statement of hybrid search as it was before issue 34 (a coverage-ranked text leg
with table-wide word statistics, the vector leg always through the HNSW index), kept so that
`python -m bench.locomo_recall` compares the defaults before and after that change in one run.
Used by the bench only, never by the service."""

from __future__ import annotations

from collections.abc import Iterable

from gql_memory.memory.search.legs_sql import LAYERS
from gql_memory.memory.search.types import MemoryLayer, When

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
    ``best``: the best (4 * :n) candidates by coverage.
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
    LIMIT (4 * :n)
)"""


def vector_leg(layer: MemoryLayer, when: When | bool = False) -> str:
    """The nearest rows valid now (or at :as_of); the validity test filters during the HNSW
    index scan (iterative scans go on until enough rows pass)."""
    spec = LAYERS[layer]
    return f"""
    (SELECT '{layer.value}' AS layer, 'vector' AS leg, id,
            1 - (embedding <=> CAST(:vector AS vector)) AS score
     FROM {spec.table}
     WHERE namespace = :ns AND embedding IS NOT NULL AND {spec.valid(spec.table, when)}
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


def legs_sql(
    layers: Iterable[MemoryLayer], when: When, vector: bool, text: bool, **_: object
) -> str:
    """Every leg of every layer in one statement: the vector leg with a query vector, the
    text leg when its weight is not 0; rows of each leg in rank order. (Called as today's
    legs_sql is; what it takes since, such as the layers a hit is rated against, is not
    read: before issue 30 hits were rated against the layers searched.)"""
    legs, ctes = [], [QUERY_CTE]
    for layer in layers:
        if vector:
            legs.append(vector_leg(layer, when))
        if text:
            legs.append(text_leg(layer))
            ctes.append(text_ctes(layer, when))
    return "WITH " + ",".join(ctes) + "\n" + "\nUNION ALL".join(legs)
