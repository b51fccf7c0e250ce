"""The statements of graph traversal: neighbours breadth-first, one row of arrays per level,
and the shortest path, both in one recursive CTE each, compiled once per variant. Values are
always bound parameters; only identifiers chosen here are formatted in."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from sqlalchemy import TextClause, text
from sqlalchemy.dialects.postgresql.asyncpg import PGDialect_asyncpg
from sqlalchemy.ext.asyncio import AsyncConnection

from gql_memory.memory.graph.edges import EDGE_FIELDS
from gql_memory.memory.graph.nodes import NODE_FIELDS
from gql_memory.memory.validity import valid_sql


class Direction(enum.Enum):
    """Which edges a traversal follows from a node."""

    OUT = "OUT"
    IN = "IN"
    BOTH = "BOTH"


@dataclass(frozen=True)
class _DriverStatement:
    """A ``text()`` statement compiled once into asyncpg's form ($1, $2 ...), run on the
    driver connection of a transaction: traversals return few, large rows, and skip the
    per-statement work of SQLAlchemy's execution and result layers (asyncpg still prepares
    and caches the statement). SQLAlchemy opens its transaction at its first statement: on a
    server connection that is the namespace's set_config, so the traversal runs inside the
    READ ONLY transaction; as the library's first statement it runs on its own, which for one
    SELECT is the same snapshot and writes nothing either way."""

    sql: str
    names: tuple[str, ...]

    @classmethod
    def compile(cls, clause: TextClause) -> _DriverStatement:
        compiled = clause.compile(dialect=PGDialect_asyncpg())
        return cls(compiled.string, tuple(compiled.positiontup or ()))

    async def fetch(self, conn: AsyncConnection, **params: Any) -> list[Any]:
        driver = (await conn.get_raw_connection()).driver_connection
        assert driver is not None
        return list(await driver.fetch(self.sql, *(params[name] for name in self.names)))


# Breadth-first search, one level per iteration: each row holds the nodes first reached at
# that distance, each with the node and edge it was reached through, and the set visited so
# far, so every node appears once, at its shortest distance, and cycles end the walk. Of the
# edges reaching a node, the one with the lowest id wins. A level is one row of arrays, one
# per column of its nodes and edges, in node id order: few rows to decode, nothing to sort or
# join afterwards. The level's nodes are read with one `id = ANY(...)` index scan (a join lets
# a generic plan hash the whole nodes table); both sides in node id order, their arrays line up.
# At most :first nodes are reached (nearest first, then by node id): the level that would
# pass the bound keeps its lowest ids (LIMIT) and is the last, so a hub of thousands of
# spokes reads the edges of a frontier of at most :first nodes and builds :first rows.
_LEVELS = """
WITH RECURSIVE bfs(depth, node_ids, labels, names, node_properties, insight_ids, episode_ids,
                   raw_ids, node_created, parents, edge_ids, sources, targets, relations,
                   weights, edge_properties, edge_created, edge_valid_from, edge_valid_to,
                   edge_superseded_by, visited, reached) AS (
    SELECT 0, ARRAY[n.id], ARRAY[CAST(n.label AS text)], ARRAY[n.name], ARRAY[n.properties],
           ARRAY[n.insight_id], ARRAY[n.episode_id], ARRAY[n.raw_id], ARRAY[n.created_at],
           CAST(NULL AS bigint[]), CAST(NULL AS bigint[]), CAST(NULL AS bigint[]),
           CAST(NULL AS bigint[]), CAST(NULL AS text[]), CAST(NULL AS double precision[]),
           CAST(NULL AS jsonb[]), CAST(NULL AS timestamptz[]), CAST(NULL AS timestamptz[]),
           CAST(NULL AS timestamptz[]), CAST(NULL AS bigint[]), ARRAY[n.id], 0
    FROM nodes n
    WHERE n.namespace = :ns AND n.id = :start
    UNION ALL
    SELECT b.depth + 1, found_nodes.*, found.parents, found.edge_ids, found.sources,
           found.targets, found.relations, found.weights, found.properties, found.created,
           found.valid_from, found.valid_to, found.superseded_by, b.visited || found.node_ids,
           b.reached + cardinality(found.node_ids)
    FROM bfs b
    CROSS JOIN LATERAL (
        SELECT array_agg(s.node ORDER BY s.node) AS node_ids,
               array_agg(s.parent ORDER BY s.node) AS parents,
               array_agg(s.id ORDER BY s.node) AS edge_ids,
               array_agg(s.source_id ORDER BY s.node) AS sources,
               array_agg(s.target_id ORDER BY s.node) AS targets,
               array_agg(s.relation ORDER BY s.node) AS relations,
               array_agg(s.weight ORDER BY s.node) AS weights,
               array_agg(s.properties ORDER BY s.node) AS properties,
               array_agg(s.created_at ORDER BY s.node) AS created,
               array_agg(s.valid_from ORDER BY s.node) AS valid_from,
               array_agg(s.valid_to ORDER BY s.node) AS valid_to,
               array_agg(s.superseded_by ORDER BY s.node) AS superseded_by
        FROM (
            SELECT DISTINCT ON (c.node) c.*
            FROM ({steps}) c
            -- an anti-join (hashable) rather than `<> ALL(visited)`, which is quadratic
            LEFT JOIN unnest(b.visited) AS seen(id) ON seen.id = c.node
            WHERE seen.id IS NULL
            ORDER BY c.node, c.id
            LIMIT :first - b.reached
        ) s
    ) found
    CROSS JOIN LATERAL (
        SELECT array_agg(n.id ORDER BY n.id), array_agg(CAST(n.label AS text) ORDER BY n.id),
               array_agg(n.name ORDER BY n.id), array_agg(n.properties ORDER BY n.id),
               array_agg(n.insight_id ORDER BY n.id), array_agg(n.episode_id ORDER BY n.id),
               array_agg(n.raw_id ORDER BY n.id), array_agg(n.created_at ORDER BY n.id)
        FROM nodes n
        WHERE n.namespace = :ns AND n.id = ANY(found.node_ids)
    ) found_nodes
    WHERE b.depth < :max_depth AND b.reached < :first AND found.node_ids IS NOT NULL
)
SELECT depth, node_ids, labels, names, node_properties, insight_ids, episode_ids, raw_ids,
       node_created, parents, edge_ids, sources, targets, relations, weights, edge_properties,
       edge_created, edge_valid_from, edge_valid_to, edge_superseded_by
FROM bfs ORDER BY depth
"""

# One step from the frontier (b.node_ids) along outgoing or incoming edges valid now (or at
# :as_of): the node reached, the node it was reached from, and the edge's columns.
_STEP_OUT = """
                SELECT e.target_id AS node, e.source_id AS parent, {edge}
                FROM edges e
                WHERE e.namespace = :ns AND e.source_id = ANY(b.node_ids){relation}
                  AND {valid}"""
_STEP_IN = """
                SELECT e.source_id AS node, e.target_id AS parent, {edge}
                FROM edges e
                WHERE e.namespace = :ns AND e.target_id = ANY(b.node_ids){relation}
                  AND {valid}"""


def _neighbors_sql(direction: Direction, by_relation: bool, as_of: bool) -> TextClause:
    """The traversal for one direction, with or without a relation filter, now or as of an
    instant. Each variant is its own statement, so PostgreSQL plans it once (a generic plan)
    and the relation is an index condition, not an `IS NULL OR` test."""
    relation = "\n                  AND e.relation = :relation" if by_relation else ""
    edge = ", ".join(f"e.{column}" for column in EDGE_FIELDS)
    steps = {Direction.OUT: [_STEP_OUT], Direction.IN: [_STEP_IN]}.get(
        direction, [_STEP_OUT, _STEP_IN]
    )
    union = "\n                UNION ALL".join(
        step.format(edge=edge, relation=relation, valid=valid_sql("e", as_of)) for step in steps
    )
    return text(_LEVELS.format(steps=union))


NEIGHBORS_SQL = {
    (direction, by_relation, as_of): _DriverStatement.compile(
        _neighbors_sql(direction, by_relation, as_of)
    )
    for direction in Direction
    for by_relation in (False, True)
    for as_of in (False, True)
}


# The same search along edges in both directions, ids only, up to the level that reaches
# :target; then the path walked back from it through the recorded parents: one row per node
# from the start to the target, with the edge that reached it (none for the start); no rows
# when the target was not reached. The last levels are the largest (thousands of nodes), so
# before building one the search looks for the target one or two hops ahead and, if it is
# there, records just the nodes the full levels would have recorded on the way to it.
def _path_sql(as_of: bool) -> TextClause:
    valid = valid_sql("e", as_of)
    return text(
        f"""
WITH RECURSIVE target_edges AS MATERIALIZED (
    SELECT e.id AS edge_id, e.source_id AS parent
    FROM edges e WHERE e.namespace = :ns AND e.target_id = :target AND {valid}
    UNION ALL
    SELECT e.id, e.target_id
    FROM edges e WHERE e.namespace = :ns AND e.source_id = :target AND {valid}
),
bfs(depth, nodes, parents, edge_ids, visited) AS (
    SELECT 0, ARRAY[CAST(:start AS bigint)], ARRAY[CAST(NULL AS bigint)],
           ARRAY[CAST(NULL AS bigint)], ARRAY[CAST(:start AS bigint)]
    UNION ALL
    SELECT b.depth + 1, step.nodes, step.parents, step.edge_ids, b.visited || step.nodes
    FROM bfs b
    -- one hop: of the target's edges to this level, the lowest id, as the next level's
    LEFT JOIN LATERAL (
        SELECT t.edge_id, t.parent FROM target_edges t
        WHERE t.parent = ANY(b.nodes)
        ORDER BY t.edge_id LIMIT 1
    ) hit ON true
    -- two hops (when not one): the target's neighbours next to this level make the part of
    -- the next level the target is reached from; each one's lowest-id edge to this level, and
    -- the target's lowest-id edge to them. `+ 0` keeps the level (up to thousands of ids) out
    -- of the index condition: only the neighbours' own edges are read.
    LEFT JOIN LATERAL (
        SELECT t.edge_id, t.parent, via.edge_id AS via_edge_id, via.parent AS via_parent
        FROM target_edges t
        CROSS JOIN LATERAL (
            SELECT e.id AS edge_id, e.source_id AS parent FROM edges e
            WHERE e.namespace = :ns AND e.target_id = t.parent AND e.source_id + 0 = ANY(b.nodes)
              AND {valid}
            UNION ALL
            SELECT e.id, e.target_id FROM edges e
            WHERE e.namespace = :ns AND e.source_id = t.parent AND e.target_id + 0 = ANY(b.nodes)
              AND {valid}
            ORDER BY 1 LIMIT 1
        ) via
        WHERE hit.edge_id IS NULL AND b.depth + 2 <= :max_depth
        ORDER BY t.edge_id LIMIT 1
    ) hit2 ON true
    CROSS JOIN LATERAL (
        SELECT ARRAY[CAST(:target AS bigint)] AS nodes, ARRAY[hit.parent] AS parents,
               ARRAY[hit.edge_id] AS edge_ids
        WHERE hit.edge_id IS NOT NULL
        UNION ALL  -- (two levels in one row: only the parents are read after the search)
        SELECT ARRAY[hit2.parent, CAST(:target AS bigint)], ARRAY[hit2.via_parent, hit2.parent],
               ARRAY[hit2.via_edge_id, hit2.edge_id]
        WHERE hit2.edge_id IS NOT NULL
        UNION ALL
        SELECT array_agg(s.node ORDER BY s.node), array_agg(s.parent ORDER BY s.node),
               array_agg(s.edge_id ORDER BY s.node)
        FROM (
            SELECT DISTINCT ON (c.node) c.node, c.parent, c.edge_id
            FROM (
                SELECT e.target_id AS node, e.source_id AS parent, e.id AS edge_id
                FROM edges e
                WHERE hit.edge_id IS NULL AND hit2.edge_id IS NULL
                  AND e.namespace = :ns AND e.source_id = ANY(b.nodes) AND {valid}
                UNION ALL
                SELECT e.source_id, e.target_id, e.id
                FROM edges e
                WHERE hit.edge_id IS NULL AND hit2.edge_id IS NULL
                  AND e.namespace = :ns AND e.target_id = ANY(b.nodes) AND {valid}
            ) c
            LEFT JOIN unnest(b.visited) AS seen(id) ON seen.id = c.node
            WHERE seen.id IS NULL
            ORDER BY c.node, c.edge_id
        ) s
    ) step
    WHERE b.depth < :max_depth AND step.nodes IS NOT NULL
      AND NOT CAST(:target AS bigint) = ANY(b.visited)
),
reached AS (
    SELECT r.node, r.parent, r.edge_id
    FROM bfs b CROSS JOIN LATERAL unnest(b.nodes, b.parents, b.edge_ids) AS r(node, parent, edge_id)
),
walk(step, node, edge_id, parent) AS (
    SELECT 0, r.node, r.edge_id, r.parent FROM reached r WHERE r.node = :target
    UNION ALL
    SELECT w.step + 1, r.node, r.edge_id, r.parent
    FROM walk w JOIN reached r ON r.node = w.parent
)
-- one index lookup per row of the path (LIMIT 1 keeps it a lookup: the planner, unsure how
-- long the walk is, would otherwise join it with the whole of both tables)
SELECT n.*, e.*
FROM walk w
CROSS JOIN LATERAL (
    SELECT {", ".join("n." + c for c in NODE_FIELDS)} FROM nodes n
    WHERE n.namespace = :ns AND n.id = w.node LIMIT 1
) n
LEFT JOIN LATERAL (
    SELECT {", ".join("e." + c for c in EDGE_FIELDS)} FROM edges e
    WHERE e.namespace = :ns AND e.id = w.edge_id LIMIT 1
) e ON true
ORDER BY w.step DESC
"""
    )


PATH_SQL = {as_of: _DriverStatement.compile(_path_sql(as_of)) for as_of in (False, True)}
