"""Row-level security as defence in depth: the server's own connections, asked a deliberately
unscoped ``SELECT *`` on every tenant table, see only the namespace their transaction names.

The tables are listed from the catalog, so a new table without a policy fails here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
import pytest_asyncio
import sqlalchemy.exc
from sqlalchemy import text
from sqlalchemy.engine import make_url

from gql_memory.config import DEFAULT_DATABASE_ROLE, Settings
from gql_memory.db import Database
from gql_memory.db.fair import NamespacedDatabase
from gql_memory.embeddings import make_provider
from gql_memory.memory import Memory
from gql_memory.memory.consolidation.schedule import ConsolidationWorker
from gql_memory.server.app import create_app
from tests.conftest import start_live_server, truncate_all

# Tables that are not tenant data, and why.
NOT_TENANT_TABLES = {
    "alembic_version": "the schema version",
    "embedding_config": "how all vectors were embedded (one row per database)",
    "api_keys": "the key registry: looked up by hash before the namespace is known",
}
NAMESPACES = ("tenant_a", "tenant_b")


@pytest_asyncio.fixture(scope="module")
async def app(settings: Settings) -> AsyncIterator[Any]:
    """The real app, started, so that its request pool is the one under test."""
    application = create_app(settings)
    server, task, _ = await start_live_server(application)
    yield application
    server.should_exit = True
    await task


@pytest_asyncio.fixture(scope="module")
async def filled(db: Database, settings: Settings) -> list[str]:
    """Rows of two namespaces in every tenant table, written by the owner."""
    await truncate_all(db)
    for namespace in NAMESPACES:
        memory = Memory(db, settings.with_overrides(working_memory_capacity=2), namespace)
        first = await memory.raw.store("s1", "Maria", f"Maria met Tom in Lisbon ({namespace})")
        await memory.raw.store("s1", "Tom", "We walked along the river.")
        for n in range(3):  # one over capacity: an eviction archives into stale_memory
            await memory.working.add(f"note {n} of {namespace}", session_id="s1")
        await memory.insights.add(f"Maria likes Lisbon ({namespace})", source_ids=[first.id])
        await memory.episodes.store("trip", 0.5, f"went well ({namespace})")
        a = await memory.graph.add_node("Person", "Maria")
        b = await memory.graph.add_node("City", "Lisbon")
        await memory.graph.add_edge(a.id, b.id, "VISITED")
        await memory.insights.add(f"Maria likes Lisbon ({namespace})")  # a duplicate, merged
    # the scheduled pass journals its actions and leaves a cursor per namespace
    worker = ConsolidationWorker(
        db, make_provider(settings), settings.with_overrides(consolidation_interval_s=60)
    )
    assert await worker.run_once() == dict.fromkeys(NAMESPACES, 1)
    async with db.read() as conn:
        return await tenant_tables(conn)


async def tenant_tables(conn: Any) -> list[str]:
    rows = await conn.execute(
        text("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")
    )
    return [t for t in rows.scalars() if t not in NOT_TENANT_TABLES]


async def test_every_tenant_table_has_rows_of_both_namespaces(
    db: Database, filled: list[str]
) -> None:
    """The premise of the tests below: nothing is vacuously empty."""
    assert len(filled) >= 8
    async with db.read() as conn:
        for table in filled:
            seen = await conn.execute(text(f"SELECT DISTINCT namespace FROM {table}"))
            assert set(seen.scalars()) == set(NAMESPACES), table


async def test_every_tenant_table_enforces_a_namespace_policy(
    db: Database, filled: list[str]
) -> None:
    async with db.read() as conn:
        for table in filled:
            enabled = await conn.scalar(
                text("SELECT relrowsecurity FROM pg_class WHERE oid = CAST(:t AS regclass)"),
                {"t": table},
            )
            policies = (
                await conn.execute(
                    text("SELECT roles::text[], qual FROM pg_policies WHERE tablename = :t"),
                    {"t": table},
                )
            ).all()
            assert enabled, f"{table}: row-level security is not enabled"
            assert policies, f"{table}: no row-level security policy"
            assert all("app.namespace" in qual for _, qual in policies), (table, policies)


async def test_an_unscoped_select_sees_only_the_transactions_namespace(
    app: Any, filled: list[str]
) -> None:
    for namespace in NAMESPACES:
        scoped = NamespacedDatabase(app.state.db, namespace, app.state.fair_share)
        async with scoped.read() as conn:
            for table in filled:
                rows = (await conn.execute(text(f"SELECT * FROM {table}"))).mappings().all()
                assert rows, f"{table}: {namespace} sees none of its own rows"
                assert {r["namespace"] for r in rows} == {namespace}, table


async def test_without_a_namespace_the_server_role_sees_nothing(
    app: Any, filled: list[str]
) -> None:
    async with app.state.db.read() as conn:
        for table in filled:
            assert await conn.scalar(text(f"SELECT count(*) FROM {table}")) == 0, table


async def test_a_write_into_another_namespace_is_refused(app: Any, filled: list[str]) -> None:
    scoped = NamespacedDatabase(app.state.db, "tenant_a", app.state.fair_share)
    with pytest.raises(sqlalchemy.exc.DBAPIError) as refused:
        async with scoped.write() as conn:
            await conn.execute(
                text(
                    "INSERT INTO working_memory (namespace, session_id, content) "
                    "VALUES ('tenant_b', 's1', 'planted')"
                )
            )
    assert isinstance(refused.value.orig.__cause__, asyncpg.InsufficientPrivilegeError)
    async with scoped.write() as conn:  # moving a row out of the namespace is refused too
        with pytest.raises(sqlalchemy.exc.DBAPIError):
            await conn.execute(text("UPDATE raw_dialogue SET namespace = 'tenant_b'"))


async def test_the_server_runs_as_a_role_that_cannot_bypass_policies(app: Any) -> None:
    async with app.state.db.read() as conn:
        role = (
            await conn.execute(
                text(
                    "SELECT rolname, rolsuper, rolbypassrls FROM pg_roles "
                    "WHERE rolname = current_user"
                )
            )
        ).one()
    assert tuple(role) == (DEFAULT_DATABASE_ROLE, False, False)


async def test_full_text_matching_may_use_its_index_under_the_policies(db: Database) -> None:
    """Under row-level security PostgreSQL uses an index only for LEAKPROOF operators; the
    migration marks tsvector @@ tsquery so, or every text search would scan its namespace."""
    async with db.read() as conn:
        leakproof = await conn.scalar(
            text("SELECT proleakproof FROM pg_proc WHERE oid = 'ts_match_vq'::regproc")
        )
    assert leakproof


async def test_the_text_leg_reads_lexeme_statistics_under_the_policies(
    app: Any, db: Database, filled: list[str]
) -> None:
    """pg_stats hides the statistics of tables under row-level security; the text leg reads
    its lexeme frequencies through gql_memory_lexeme_stats, which must see them."""
    async with db.write() as conn:
        await conn.execute(text("ANALYZE raw_dialogue"))
    async with db.read() as conn:
        owner_sees = (
            await conn.execute(
                text(
                    "SELECT CAST(CAST(most_common_elems AS text) AS text[]) FROM pg_stats "
                    "WHERE tablename = 'raw_dialogue' AND attname = 'content_tsv'"
                )
            )
        ).scalar()
    assert owner_sees
    scoped = NamespacedDatabase(app.state.db, "tenant_a", app.state.fair_share)
    async with scoped.read() as conn:
        hidden = await conn.scalar(
            text("SELECT count(*) FROM pg_stats WHERE tablename = 'raw_dialogue'")
        )
        seen = await conn.scalar(text("SELECT elems FROM gql_memory_lexeme_stats('raw_dialogue')"))
        refused = await conn.scalar(
            text("SELECT count(*) FROM gql_memory_lexeme_stats('pg_authid')")
        )
    assert hidden == 0  # what the function works around
    assert seen == owner_sees
    assert refused == 0


async def test_a_dba_provisioned_login_runs_as_the_role(
    settings: Settings, db: Database, filled: list[str]
) -> None:
    """GQL_MEMORY_APP_DATABASE_URL: a login a DBA made a member of gql_memory_app (the
    recipe of docs/operations.md); the server's connections become the role at their start."""
    async with db.write() as conn:
        await conn.execute(
            text(
                "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'memory_server')"
                " THEN CREATE ROLE memory_server LOGIN IN ROLE gql_memory_app; END IF; END $$"
            )
        )
    assert settings.database_url
    login = make_url(settings.database_url).set(username="memory_server")
    provisioned = settings.with_overrides(
        app_database_url=login.render_as_string(hide_password=False)
    )
    application = create_app(provisioned)
    server, task, _ = await start_live_server(application)
    try:
        scoped = NamespacedDatabase(application.state.db, "tenant_b", application.state.fair_share)
        async with scoped.read() as conn:
            who = (await conn.execute(text("SELECT session_user, current_user"))).one()
            namespaces = await conn.execute(text("SELECT DISTINCT namespace FROM insights"))
            assert set(namespaces.scalars()) == {"tenant_b"}
        assert tuple(who) == ("memory_server", DEFAULT_DATABASE_ROLE)
    finally:
        server.should_exit = True
        await task
