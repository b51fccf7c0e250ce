"""Tenant keys (migration 0013): every tenant table, present or future, is keyed by namespace
first, so Citus can distribute the schema by namespace; and the migration does this on a
database full of data, and back.

Tenant tables are discovered from the catalog: every table with a ``namespace`` column, less
the global tables of gql_memory.db.tables.GLOBAL_TABLES (a distributed engine keeps those
whole on every node). Citus accepts a key on a distributed table only if it holds the
distribution column; a foreign key only between tables distributed alike, on that column at
the same place on both sides, and without SET NULL / SET DEFAULT on delete or any action on
update.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
from alembic import command
from sqlalchemy import Connection, text

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.embedded import EmbeddedPostgres, admin_url
from gql_memory.db.migrate import alembic_config, head_revision
from gql_memory.db.tables import GLOBAL_TABLES, TENANT_TABLES
from gql_memory.memory import Memory
from tests.conftest import _admin

KEYS_SQL = """
SELECT c.conrelid::regclass::text AS table_name, c.conname, c.contype::text AS contype,
       c.confrelid::regclass::text AS referenced, c.confdeltype::text AS confdeltype,
       c.confupdtype::text AS confupdtype,
       ARRAY(SELECT a.attname::text FROM unnest(c.conkey) WITH ORDINALITY k(n, o)
             JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.o)
           AS columns,
       ARRAY(SELECT a.attname::text FROM unnest(c.confkey) WITH ORDINALITY k(n, o)
             JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.o)
           AS referenced_columns,
       pg_get_constraintdef(c.oid) AS definition
FROM pg_constraint c
WHERE c.connamespace = 'public'::regnamespace AND c.contype IN ('p', 'u', 'f', 'x')
ORDER BY 1, 2
"""
UNIQUE_INDEXES_SQL = """
SELECT i.indrelid::regclass::text AS table_name, i.indexrelid::regclass::text AS index_name,
       ARRAY(SELECT a.attname::text FROM unnest(i.indkey) WITH ORDINALITY k(n, o)
             JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n
             WHERE k.o <= i.indnkeyatts ORDER BY k.o) AS columns,
       pg_get_indexdef(i.indexrelid) AS definition
FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
WHERE c.relnamespace = 'public'::regnamespace AND i.indisunique
ORDER BY 1, 2
"""
INDEXES_SQL = "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1"


async def tenant_tables(conn: Any) -> set[str]:
    """Every table of the schema with a namespace column, less the global ones."""
    found = await conn.execute(
        text(
            "SELECT c.relname FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid "
            "WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') "
            "AND a.attname = 'namespace' AND NOT a.attisdropped"
        )
    )
    return set(found.scalars()) - set(GLOBAL_TABLES)


async def _catalog(conn: Any) -> dict[str, list[tuple[Any, ...]]]:
    return {
        "keys": [tuple(r) for r in await conn.execute(text(KEYS_SQL))],
        "indexes": [tuple(r) for r in await conn.execute(text(INDEXES_SQL))],
    }


def test_the_declared_tenant_and_global_tables_do_not_overlap() -> None:
    assert not TENANT_TABLES & set(GLOBAL_TABLES)


async def test_every_table_is_a_tenant_table_or_a_declared_global_one(db: Database) -> None:
    """A new table must either hold a namespace (and so be checked below) or be declared
    global, with its reason, in gql_memory.db.tables."""
    async with db.read() as conn:
        tenants = await tenant_tables(conn)
        listed = await conn.execute(
            text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        )
        tables = set(listed.scalars())
    assert tenants == TENANT_TABLES
    assert tables - tenants == set(GLOBAL_TABLES)


async def key_problems(conn: Any) -> list[str]:
    """The keys of tenant tables a tenant-sharding engine would refuse, with why."""
    tenants = await tenant_tables(conn)
    keys = (await conn.execute(text(KEYS_SQL))).mappings().all()
    indexes = (await conn.execute(text(UNIQUE_INDEXES_SQL))).mappings().all()
    keyed = {k["table_name"] for k in keys if k["contype"] == "p"}
    problems = [f"{table}: no primary key" for table in sorted(tenants - keyed)]
    for key in keys:
        shown = f"{key['table_name']}.{key['conname']}: {key['definition']}"
        if key["contype"] in ("p", "u", "x") and key["table_name"] in tenants:
            if key["columns"][:1] != ["namespace"]:
                problems.append(f"{shown} (does not lead with namespace)")
        elif key["contype"] == "f" and tenants & {key["table_name"], key["referenced"]}:
            if not {key["table_name"], key["referenced"]} <= tenants:
                problems.append(f"{shown} (between a tenant table and a global one)")
            elif not _namespace_at_the_same_place(key["columns"], key["referenced_columns"]):
                problems.append(f"{shown} (namespace not at the same place on both sides)")
            elif key["confdeltype"] in ("n", "d"):
                problems.append(f"{shown} (SET NULL / SET DEFAULT on delete: Citus refuses it)")
            elif key["confupdtype"] not in ("a", "r"):
                problems.append(f"{shown} (an action on update: Citus refuses it)")
    problems += [
        f"{i['table_name']}.{i['index_name']}: {i['definition']} (does not lead with namespace)"
        for i in indexes
        if i["table_name"] in tenants and i["columns"][:1] != ["namespace"]
    ]
    return problems


def _namespace_at_the_same_place(columns: list[str], referenced: list[str]) -> bool:
    return (
        "namespace" in columns
        and "namespace" in referenced
        and columns.index("namespace") == referenced.index("namespace")
    )


async def test_every_key_of_every_tenant_table_holds_its_namespace(db: Database) -> None:
    """Primary keys, unique constraints and unique indexes lead with namespace; foreign keys
    run from (namespace, x) to (namespace, id) of another tenant table."""
    async with db.read() as conn:
        problems = await key_problems(conn)
        foreign = await conn.scalar(
            text(
                "SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND "
                "connamespace = 'public'::regnamespace"
            )
        )
    assert foreign >= 8  # nothing passes vacuously
    assert not problems, "keys a tenant-sharding engine refuses:\n" + "\n".join(problems)


# --- the migration, on a database full of data --------------------------------------------


def _migrate(connection: Connection, action: str, revision: str) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    config.attributes["embedding_dim"] = Settings().hash_embedding_dim
    getattr(command, action)(config, revision)


@pytest_asyncio.fixture
async def at_0012(embedded_pg: EmbeddedPostgres) -> AsyncIterator[Database]:
    """A fresh database migrated to 0012 (the keys before tenant keys)."""
    name = "t_tenant_keys_migration"
    await _admin(embedded_pg, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await _admin(embedded_pg, f'CREATE DATABASE "{name}"')
    db = Database.from_url(admin_url(embedded_pg.server, name), Settings())
    async with db.engine.begin() as conn:
        await conn.run_sync(_migrate, "upgrade", "0012")
    yield db
    await db.dispose()
    await _admin(embedded_pg, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def _fill(db: Database) -> dict[str, int]:
    """Memories of two namespaces in every tenant table, and references across namespaces
    that the old keys let a direct writer make; the row counts after the migration."""
    settings = Settings().with_overrides(working_memory_capacity=2)
    for namespace in ("tenant_a", "tenant_b"):
        memory = Memory(db, settings, namespace)
        turn = await memory.raw.store("s1", "Maria", f"Maria met Tom in Lisbon ({namespace})")
        for n in range(3):
            await memory.working.add(f"note {n}", session_id="s1")
        old = await memory.insights.add("Maria lives in Lisbon", source_ids=[turn.id])
        new = await memory.insights.add("Maria lives in Porto")
        async with db.write() as conn:  # superseded as 0012 did it (no reason column yet)
            await conn.execute(
                text("UPDATE insights SET valid_to = now(), superseded_by = :n WHERE id = :o"),
                {"n": new.id, "o": old.id},
            )
        episode = await memory.episodes.store("trip", 0.5, "went well")
        maria = await memory.graph.add_node(
            "Person", "Maria", insight_id=new.id, episode_id=episode.id, raw_id=turn.id
        )
        city = await memory.graph.add_node("City", "Lisbon")
        await memory.graph.add_edge(maria.id, city.id, "LIVES_IN")
    async with db.write() as conn:
        counts = {
            table: await conn.scalar(text(f"SELECT count(*) FROM {table}"))
            for table in sorted(TENANT_TABLES)
            # the tables of a later migration (0017's journal) do not exist at 0012
            if await conn.scalar(text("SELECT to_regclass(:t)"), {"t": table}) is not None
        }
        # a tenant_a node tied to tenant_b's memories, an edge from it to a tenant_b node
        await conn.execute(
            text(
                "UPDATE nodes n SET insight_id = (SELECT max(id) FROM insights WHERE namespace "
                "= 'tenant_b'), raw_id = (SELECT max(id) FROM raw_dialogue WHERE namespace = "
                "'tenant_b') WHERE n.namespace = 'tenant_a' AND n.label = 'Person'"
            )
        )
        await conn.execute(
            text(
                "INSERT INTO edges (namespace, source_id, target_id, relation) SELECT "
                "'tenant_a', a.id, b.id, 'ACROSS' FROM nodes a, nodes b WHERE a.namespace = "
                "'tenant_a' AND a.label = 'Person' AND b.namespace = 'tenant_b' "
                "AND b.label = 'City'"
            )
        )
    return counts


async def test_the_migration_keys_existing_data_by_namespace_and_back(at_0012: Database) -> None:
    async with at_0012.read() as conn:
        before = await _catalog(conn)
        refused = "\n".join(await key_problems(conn))
    # the catalog check can fail: it names the keys of 0012
    for key in ("nodes_pkey", "edges_source_id_fkey", "insights_superseded_by_fkey"):
        assert key in refused, refused
    counts = await _fill(at_0012)

    async with at_0012.engine.begin() as conn:
        await conn.run_sync(_migrate, "upgrade", "head")
    async with at_0012.read() as conn:
        assert await conn.scalar(text("SELECT version_num FROM alembic_version")) == (
            head_revision()
        )
        after = {
            table: await conn.scalar(text(f"SELECT count(*) FROM {table}")) for table in counts
        }
        assert after == counts  # the edge across namespaces went, nothing else
        crossing = await conn.execute(
            text(
                "SELECT n.insight_id, n.raw_id, n.episode_id FROM nodes n "
                "WHERE n.namespace = 'tenant_a' AND n.label = 'Person'"
            )
        )
        insight_id, raw_id, episode_id = crossing.one()
        assert (insight_id, raw_id) == (None, None) and episode_id is not None
        keys = {r.conname: r.definition for r in await conn.execute(text(KEYS_SQL))}
        assert await key_problems(conn) == []
    assert keys["nodes_pkey"] == "PRIMARY KEY (namespace, id)"
    assert keys["fk_edges_ns_source"] == (
        "FOREIGN KEY (namespace, source_id) REFERENCES nodes(namespace, id) ON DELETE CASCADE"
    )
    assert keys["fk_insights_ns_superseded_by"] == (
        "FOREIGN KEY (namespace, superseded_by) REFERENCES insights(namespace, id)"
    )

    async with at_0012.engine.begin() as conn:
        await conn.run_sync(_migrate, "downgrade", "0012")
    async with at_0012.read() as conn:
        assert await _catalog(conn) == before
    async with at_0012.engine.begin() as conn:
        await conn.run_sync(_migrate, "upgrade", "head")


# --- erasing what other rows refer to ------------------------------------------------------


async def test_erasing_a_memory_detaches_what_referred_to_it(memory: Memory) -> None:
    """The keys have no ON DELETE SET NULL (Citus refuses it): erasing clears the references
    itself, as the old keys did."""
    turn = await memory.raw.store("s1", "Maria", "Maria met Tom")
    old = await memory.insights.add("Maria likes tea")
    new = await memory.insights.add("Maria likes coffee", supersedes=[old.id])
    first = await memory.episodes.store("trip", 0.5, "went well")
    second = await memory.episodes.store("trip", 0.9, "went better", supersedes=[first.id])
    node = await memory.graph.add_node(
        "Person", "Maria", insight_id=new.id, episode_id=second.id, raw_id=turn.id
    )
    assert await memory.insights.delete(new.id)
    assert await memory.episodes.delete(second.id)
    await memory.forget_session("s1")

    kept = await memory.graph.get_node(node.id)
    assert kept is not None
    assert (kept.insight_id, kept.episode_id, kept.raw_id) == (None, None, None)
    predecessor = await memory.insights.get(old.id)
    assert predecessor is not None and predecessor.superseded_by is None
    earlier = await memory.episodes.get(first.id)
    assert earlier is not None and earlier.superseded_by is None


async def test_deleting_a_node_keeps_the_edges_its_edges_superseded(memory: Memory) -> None:
    a = await memory.graph.add_node("City", "Lisbon")
    b = await memory.graph.add_node("City", "Porto")
    c = await memory.graph.add_node("City", "Faro")
    old = await memory.graph.add_edge(a.id, b.id, "ROAD")
    new = await memory.graph.add_edge(a.id, c.id, "ROAD", supersedes=[old.id])
    assert await memory.graph.delete_node(c.id)  # takes `new` with it
    async with memory.db.read() as conn:
        rows = await conn.execute(
            text("SELECT id, superseded_by FROM edges WHERE namespace = :ns ORDER BY id"),
            {"ns": memory.namespace},
        )
        assert [tuple(r) for r in rows] == [(old.id, None)]
    assert new.id != old.id
