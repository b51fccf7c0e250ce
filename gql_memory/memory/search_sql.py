"""The statements of hybrid search: the legs of every layer, and the graph statement
(neighbours of the best hits, boosts of every candidate). Builders return SQL text; values
are always bound parameters, only identifiers chosen here are formatted in."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from gql_memory.memory.decay import ATTENTION_SQL


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


def lexeme_ctes(layer: MemoryLayer) -> str:
    """Per layer: each query lexeme as a tsquery, and two OR queries (any lexeme; any
    *selective* lexeme).

    A lexeme is common when PostgreSQL's own statistics of the tsvector column
    (pg_stats.most_common_elems, kept fresh by autovacuum's ANALYZE; read through the
    function gql_memory_lexeme_stats of migration 0007, because pg_stats hides the statistics
    of tables under row-level security from their readers) put it in more than
    ``max_df`` of the rows; every other lexeme is selective. Statistics only bound the work —
    which rows get ranked when a question full of common words matches much of a namespace —
    they never change a row's score.
    """
    table = LAYERS[layer].table
    name = layer.value.lower()
    return f"""
lex_{name} AS (
    SELECT CAST({_QUOTED} AS tsquery) AS q,
           {_QUOTED} AS quoted,
           coalesce(st.freqs[array_position(st.elems, ql.lexeme)], 0) < :max_df AS selective
    FROM query_lexemes ql
    LEFT JOIN LATERAL gql_memory_lexeme_stats('{table}') st ON true
),
match_{name} AS (
    SELECT CAST(string_agg(quoted, ' | ') AS tsquery) AS any_lexeme,
           CAST(string_agg(quoted, ' | ') FILTER (WHERE selective) AS tsquery) AS selective
    FROM lex_{name}
)"""


def vector_leg(layer: MemoryLayer) -> str:
    spec = LAYERS[layer]
    return f"""
    (SELECT '{layer.value}' AS layer, 'vector' AS leg, id,
            1 - (embedding <=> CAST(:vector AS vector)) AS score
     FROM {spec.table}
     WHERE namespace = :ns{spec.extra_where}
     ORDER BY embedding <=> CAST(:vector AS vector)
     LIMIT :n)"""


def text_leg(layer: MemoryLayer) -> str:
    """Rows containing any query lexeme (OR semantics), ranked by coverage — how many distinct
    query lexemes a row contains — then cover density (ts_rank_cd, normalised to 0..1).

    Ranking must score every candidate, so the candidates are bounded: up to
    :max_matches rows containing a selective lexeme, plus up to :common_matches rows
    containing any lexeme (those matching only common words rank low anyway). Coverage is
    cheap; ts_rank_cd is not, so it only orders the best :rerank rows by coverage.
    """
    spec = LAYERS[layer]
    name = layer.value.lower()
    return f"""
    (SELECT '{layer.value}' AS layer, 'text' AS leg, top.id,
            top.coverage + ts_rank_cd(top.content_tsv, mt.any_lexeme, 32) AS score
     FROM (SELECT m.id, m.content_tsv,
                  (SELECT count(*) FROM lex_{name} lx WHERE m.content_tsv @@ lx.q) AS coverage
           FROM ((SELECT t.id FROM {spec.table} t, match_{name} mt
                  WHERE t.namespace = :ns AND t.content_tsv @@ mt.selective
                  LIMIT :max_matches)
                 UNION
                 (SELECT t.id FROM {spec.table} t, match_{name} mt
                  WHERE t.namespace = :ns AND t.content_tsv @@ mt.any_lexeme
                  LIMIT :common_matches)) candidates
           JOIN {spec.table} m ON m.id = candidates.id
           ORDER BY coverage DESC, m.id DESC
           LIMIT :rerank) top, match_{name} mt
     ORDER BY score DESC, top.id DESC
     LIMIT :n)"""


def graph_sql(layers: Iterable[MemoryLayer]) -> str:
    """Neighbours of the best hits and the boosts of every candidate, in one statement.

    ``lenders`` are the best fused hits; each lends to the memories whose nodes are one edge
    from one of its nodes (a raw turn's previous and next turns, an insight's source turns,
    any edge a client drew between memories). ``cand`` (the fused candidates plus those
    neighbours) get their session attention and their hop distance from the session's seeds.
    """
    chosen = list(layers)

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
             WHERE e.namespace = :ns AND e.source_id = ln.node_id LIMIT :fanout)
            UNION ALL
            (SELECT e.source_id FROM edges e
             WHERE e.namespace = :ns AND e.target_id = ln.node_id LIMIT :fanout)
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
        JOIN seeds ON e.source_id = seeds.id WHERE e.namespace = :ns
        UNION SELECT e.source_id, seeds.id FROM edges e
        JOIN seeds ON e.target_id = seeds.id WHERE e.namespace = :ns
    ),
    hop2 AS MATERIALIZED (
        SELECT e.target_id AS id, hop1.origin FROM edges e
        JOIN hop1 ON e.source_id = hop1.id WHERE e.namespace = :ns
        UNION SELECT e.source_id, hop1.origin FROM edges e
        JOIN hop1 ON e.target_id = hop1.id WHERE e.namespace = :ns
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
