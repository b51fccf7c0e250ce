"""`gql-memory distribute` on the cluster: the layout of docs/scaling.md step 5, idempotent,
refused with nothing changed where it cannot be done, and migrations still run after it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.distribute import DistributionRefused, distribute, tenant_tables
from gql_memory.db.migrate import alembic_config, current_revision, head_revision
from gql_memory.db.tables import GLOBAL_TABLES
from tests.citus.cluster import Cluster
from tests.citus.conftest import ROLE, create_citus_database, drop_citus_database

GQL_MEMORY = Path(sys.executable).parent / "gql-memory"
SHARDS_VISIBLE = "SET citus.show_shards_for_app_name_prefixes = '*';"


def gql_memory(*args: str, database_url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": database_url, "GQL_MEMORY_LOG_LEVEL": "WARNING"}
    return subprocess.run(
        [str(GQL_MEMORY), *args], env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def fresh(citus_cluster: Cluster) -> Iterator[str]:
    """A database of its own on the coordinator, with Citus and its workers, not migrated."""
    yield create_citus_database(citus_cluster, "fresh_distribution")
    drop_citus_database(citus_cluster, "fresh_distribution")


def test_migrate_then_distribute_twice(fresh: str, citus_cluster: Cluster) -> None:
    migrated = gql_memory("migrate", database_url=fresh)
    assert migrated.returncode == 0, migrated.stderr
    first = gql_memory("distribute", database_url=fresh)
    assert first.returncode == 0, first.stderr
    assert "raw_dialogue: distributed by namespace" in first.stdout
    assert "api_keys: reference table" in first.stdout
    assert "foreign keys between tenant tables dropped and restored" in first.stdout
    assert "role gql_memory_app: may log in" in first.stdout
    second = gql_memory("distribute", database_url=fresh)
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "already distributed: nothing to change"

    coordinator = citus_cluster.coordinator
    name = "fresh_distribution"
    kinds = dict(
        line.split("|")
        for line in coordinator.psql(
            "SELECT logicalrelid::text, partmethod FROM pg_dist_partition", name
        ).splitlines()
    )
    tenant = {
        "raw_dialogue",
        "working_memory",
        "stale_memory",
        "insights",
        "episodes",
        "session_state",
        "nodes",
        "edges",
        "consolidation_actions",
        "consolidation_cursors",
    }
    assert kinds == {**dict.fromkeys(tenant, "h"), "api_keys": "n", "embedding_config": "n"}
    groups = coordinator.psql(
        "SELECT count(DISTINCT colocationid) FROM pg_dist_partition WHERE partmethod = 'h'", name
    )
    assert groups == "1"  # every tenant table co-located
    keys = coordinator.psql(
        "SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND connamespace = 2200", name
    )
    assert keys == "9"  # restored


def test_distribute_refuses_a_database_without_citus(citus_cluster: Cluster) -> None:
    coordinator = citus_cluster.coordinator
    coordinator.psql("DROP DATABASE IF EXISTS plain WITH (FORCE)", database="postgres")
    coordinator.psql("CREATE DATABASE plain", database="postgres")
    try:
        refused = gql_memory("distribute", database_url=coordinator.tcp_url("plain"))
        assert refused.returncode == 2
        assert "this database has no Citus" in refused.stderr
        assert "nothing was changed" in refused.stderr
        assert (
            coordinator.psql("SELECT count(*) FROM pg_class WHERE relnamespace = 2200", "plain")
            == "0"
        )
    finally:
        coordinator.psql("DROP DATABASE plain WITH (FORCE)", database="postgres")


async def test_distribute_refuses_a_coordinator_without_workers(citus_cluster: Cluster) -> None:
    coordinator = citus_cluster.coordinator
    coordinator.psql("DROP DATABASE IF EXISTS lonely WITH (FORCE)", database="postgres")
    coordinator.psql("CREATE DATABASE lonely", database="postgres")
    coordinator.psql("CREATE EXTENSION citus; CREATE EXTENSION vector", database="lonely")
    db = Database.for_maintenance(coordinator.tcp_url("lonely"), Settings())
    try:
        with pytest.raises(DistributionRefused, match="no active worker node"):
            await distribute(db, ROLE)
        assert coordinator.psql("SELECT count(*) FROM pg_dist_partition", "lonely") == "0"
    finally:
        await db.dispose()
        coordinator.psql("DROP DATABASE lonely WITH (FORCE)", database="postgres")


async def test_the_shards_carry_the_policies_grants_and_functions(
    owner: Database, citus_cluster: Cluster
) -> None:
    async with owner.read() as conn:
        tables = await tenant_tables(conn)
        functions = set(
            (
                await conn.execute(
                    text(
                        "SELECT proname FROM pg_proc WHERE proname LIKE 'gql_memory%' "
                        "AND pronamespace = 'public'::regnamespace"
                    )
                )
            ).scalars()
        )
    assert set(tables) >= {"raw_dialogue", "insights", "edges"}
    assert not set(tables) & set(GLOBAL_TABLES)
    for worker in citus_cluster.workers:
        shards = worker.psql(
            SHARDS_VISIBLE + "SELECT c.relname, c.relrowsecurity, "
            f"has_table_privilege('{ROLE}', c.oid, 'INSERT'), "
            "(SELECT count(*) FROM pg_policy p WHERE p.polrelid = c.oid) "
            "FROM pg_class c WHERE c.relkind = 'r' AND c.relname ~ '_[0-9]+$' "
            "AND regexp_replace(c.relname, '_[0-9]+$', '') = ANY(string_to_array("
            f"'{','.join(tables)}', ','))"
        ).splitlines()
        assert shards, worker.name
        for line in shards:
            name, rls, may_insert, policies = line.split("|")
            assert (rls, may_insert, policies) == ("t", "t", "1"), (worker.name, name)
        on_worker = set(
            worker.psql("SELECT proname FROM pg_proc WHERE proname LIKE 'gql_memory%'").split()
        )
        assert on_worker == functions, worker.name
        role = worker.psql(
            f"SELECT rolcanlogin, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = '{ROLE}'"
        )
        assert role == "t|f|f", worker.name
        assert (
            worker.psql("SELECT proleakproof FROM pg_proc WHERE oid = 'ts_match_vq'::regproc")
            == "t"
        )


async def test_a_new_tenant_table_is_taken_up_by_the_next_run(owner: Database) -> None:
    async with owner.write() as conn:
        await conn.execute(
            text(
                "CREATE TABLE later_tenant_table (namespace varchar(255) NOT NULL, id bigint, "
                "PRIMARY KEY (namespace, id))"
            )
        )
    try:
        done = await distribute(owner, ROLE)
        assert done.changes == [
            "later_tenant_table: distributed by namespace, co-located with raw_dialogue"
        ]
        assert (await distribute(owner, ROLE)).changes == []
    finally:
        async with owner.write() as conn:
            await conn.execute(text("DROP TABLE later_tenant_table"))


async def test_the_last_migration_downgrades_and_upgrades_on_the_distributed_database(
    owner: Database, citus_cluster: Cluster
) -> None:
    from alembic import command

    previous = "0013"
    assert await current_revision(owner) == head_revision()

    def migrate(connection: object, action: str, revision: str) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        config.attributes["embedding_dim"] = Settings().hash_embedding_dim
        getattr(command, action)(config, revision)

    def bodies() -> set[str]:
        return {
            worker.psql(
                "SELECT string_agg(CASE WHEN prosrc LIKE '%gql_memory_name_namespace(ns)%' THEN "
                "'set local' ELSE 'set_config' END, ',') FROM pg_proc "
                "WHERE proname IN ('gql_memory_add_working', 'gql_memory_store_turns')"
            )
            for worker in citus_cluster.workers
        }

    assert bodies() == {"set local,set local"}
    async with owner.engine.begin() as conn:
        await conn.run_sync(migrate, "downgrade", previous)
    assert bodies() == {"set_config,set_config"}
    async with owner.engine.begin() as conn:
        await conn.run_sync(migrate, "upgrade", "head")
    assert bodies() == {"set local,set local"}
    assert await current_revision(owner) == head_revision()
    assert (await distribute(owner, ROLE)).changes == []
