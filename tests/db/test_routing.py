"""The routing check of tests/db/routing.py, on statements it must pass and must fail: it is
the instrument of test_statement_routing.py, so it has to be able to say no."""

from __future__ import annotations

import pytest

from gql_memory.db.tables import ALL_NAMESPACES
from tests.db.routing import reads_every_namespace, unrouted

ROUTED = {
    "one table": "SELECT id FROM nodes WHERE namespace = $1 AND id = $2",
    "unqualified, reversed": "SELECT count(*) FROM working_memory WHERE $1 = namespace",
    "a cast value": "DELETE FROM edges WHERE namespace = CAST($1 AS text) AND id = $2",
    "a constant": "SELECT 1 FROM insights WHERE namespace = 'default'",
    "join on (namespace, id)": (
        "SELECT e.id FROM edges e JOIN nodes n ON n.namespace = e.namespace "
        "AND n.id = e.source_id WHERE e.namespace = $1"
    ),
    "join pinned on both sides": (
        "SELECT 1 FROM edges e JOIN nodes n ON n.id = e.source_id "
        "WHERE e.namespace = $1 AND n.namespace = $1"
    ),
    "correlated subquery": (
        "SELECT n.id FROM nodes n WHERE n.namespace = $1 AND NOT EXISTS ("
        "SELECT 1 FROM edges e WHERE e.namespace = n.namespace AND e.source_id = n.id)"
    ),
    "lateral": (
        "SELECT p.id FROM unnest($2::bigint[]) u(id) CROSS JOIN LATERAL ("
        "SELECT r.id FROM raw_dialogue r WHERE r.namespace = $1 AND r.id < u.id LIMIT 1) p"
    ),
    "CTE named like nothing it reads": (
        "WITH nodes_seen AS (SELECT id FROM nodes WHERE namespace = $1) SELECT * FROM nodes_seen"
    ),
    "a CTE that shadows a table name is no table": (
        "WITH RECURSIVE edges(id) AS (SELECT 1 UNION ALL SELECT id + 1 FROM edges "
        "WHERE id < 3) SELECT id FROM edges"
    ),
    "insert with its namespace": (
        "INSERT INTO nodes (namespace, label, name) VALUES ($1, $2, $3) "
        "ON CONFLICT (namespace, label, name) DO NOTHING"
    ),
    "insert ... select of one namespace": (
        "INSERT INTO edges (namespace, source_id, target_id, relation) "
        "SELECT $1, s, t, 'NEXT' FROM unnest($2::bigint[], $3::bigint[]) AS u(s, t)"
    ),
    "returning, correlated to the inserted row": (
        "INSERT INTO episodes (namespace, query) VALUES ($1, $2) RETURNING id, (SELECT "
        "array_agg(p.id) FROM episodes p WHERE p.namespace = episodes.namespace "
        "AND p.superseded_by = episodes.id)"
    ),
    "a SQL function's argument": (
        "DELETE FROM working_memory w WHERE w.namespace = ns AND w.id = ANY(victims)"
    ),
    "a PL/pgSQL assignment": (
        "decayed := decayed || ARRAY(SELECT w.id FROM working_memory w WHERE w.namespace = ns)"
    ),
    "a PL/pgSQL expression": "ARRAY(SELECT id FROM nodes WHERE namespace = ns)",
    "a foreign-key check": (
        'SELECT $3 FROM ONLY "public"."nodes" x WHERE "namespace"::pg_catalog.text '
        'OPERATOR(pg_catalog.=) $1::pg_catalog.text AND "id" OPERATOR(pg_catalog.=) $2 '
        "FOR KEY SHARE OF x"
    ),
    "set operation": (
        "SELECT session_id FROM working_memory WHERE namespace = $1 "
        "UNION SELECT session_id FROM raw_dialogue WHERE namespace = $1"
    ),
    "no tenant table": "SELECT key_hash FROM api_keys WHERE key_hash = $1",
    "schema statement": "ALTER TABLE insights ADD COLUMN embedding_next vector(16)",
    "not SQL, no tenant table": "this is not SQL",
}

UNROUTED = {
    "no predicate": ("SELECT count(*) FROM edges", "edges"),
    "id alone": ("SELECT * FROM nodes WHERE id = $1", "nodes"),
    "namespace under OR": (
        "SELECT 1 FROM nodes WHERE namespace = $1 OR id = $2",
        "nodes",
    ),
    "namespace in a list": ("SELECT 1 FROM nodes WHERE namespace = ANY($1)", "nodes"),
    "a joined table left open": (
        "SELECT e.id FROM edges e JOIN nodes n ON n.id = e.source_id WHERE e.namespace = $1",
        "nodes",
    ),
    "joined on namespaces only, neither pinned": (
        "SELECT 1 FROM edges e JOIN nodes n ON n.namespace = e.namespace AND n.id = e.source_id",
        "edges",
    ),
    "an open subquery": (
        "SELECT id FROM nodes WHERE namespace = $1 AND id IN (SELECT source_id FROM edges)",
        "edges",
    ),
    "an open CTE": (
        "WITH x AS (SELECT id FROM insights) SELECT * FROM x JOIN nodes n "
        "ON n.namespace = $1 AND n.insight_id = x.id",
        "insights",
    ),
    "update by id": ("UPDATE edges SET weight = 2 WHERE id = $1", "edges"),
    "update from an open join": (
        "UPDATE insights t SET embedding = u.v FROM unnest($1::bigint[], $2::text[]) "
        "AS u(id, v) WHERE t.id = u.id",
        "insights",
    ),
    "delete using": (
        "DELETE FROM edges e USING nodes n WHERE n.namespace = $1 AND n.id = e.source_id",
        "edges",
    ),
    "insert without its namespace": (
        "INSERT INTO nodes (label, name) VALUES ($1, $2)",
        "does not name its namespace",
    ),
    "insert copying namespaces": (
        "INSERT INTO stale_memory (namespace, session_id, original_content, importance, reason) "
        "SELECT w.namespace, w.session_id, w.content, w.importance, 'X' FROM working_memory w "
        "WHERE w.namespace = $1",
        "does not insert one namespace value",
    ),
    "moving a row": (
        "UPDATE nodes SET namespace = $2 WHERE namespace = $1 AND id = $3",
        "sets its namespace",
    ),
    "truncate": ("TRUNCATE nodes, edges", "TRUNCATE nodes"),
    "merge": (
        "MERGE INTO nodes n USING (SELECT 1 AS id) s ON n.namespace = $1 AND n.id = s.id "
        "WHEN MATCHED THEN DELETE",
        "MERGE INTO nodes",
    ),
    "an open side of a set operation, sorted": (
        "SELECT id FROM nodes WHERE namespace = $1 UNION SELECT id FROM edges ORDER BY 1",
        "edges",
    ),
    "copy": ("COPY raw_dialogue TO STDOUT", "COPY raw_dialogue"),
    "an unknown alias": (
        "SELECT 1 FROM nodes n WHERE m.namespace = $1",
        "nodes",
    ),
    "unparsable but naming a tenant table": ("SELECT FROM FROM nodes", "does not parse"),
}


@pytest.mark.parametrize("sql", ROUTED.values(), ids=ROUTED.keys())
def test_a_statement_pinned_to_one_namespace_passes(sql: str) -> None:
    assert unrouted(sql) == []


@pytest.mark.parametrize(("sql", "named"), UNROUTED.values(), ids=UNROUTED.keys())
def test_a_statement_that_spans_namespaces_fails_naming_why(sql: str, named: str) -> None:
    problems = unrouted(sql)
    assert problems, sql
    assert any(named in problem for problem in problems), problems


def test_a_deliberate_read_of_every_namespace_is_told_apart() -> None:
    marked = f"SELECT DISTINCT namespace {ALL_NAMESPACES} FROM insights"
    assert reads_every_namespace(marked)
    assert unrouted(marked)  # still unroutable: it is reported as a fan-out, not passed
    assert not reads_every_namespace("SELECT DISTINCT namespace FROM insights")
