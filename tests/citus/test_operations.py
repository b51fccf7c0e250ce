"""Every operation on the cluster, and where each tenant's statements ran.

- the README's tour, as written, on a fresh distributed database (its subscription included:
  LISTEN/NOTIFY stays on the coordinator);
- the full workload of tests/db/test_statement_routing.py through the real HTTP app, for two
  tenants placed on different workers, API keys required; then the library's (import, a
  third namespace) and ``reembed``'s column swap and HNSW rebuild on the distributed tables;
- ``gql-memory keys`` on the coordinator (api_keys is a reference table);
- each worker's pg_stat_statements: every statement that named a shard named only shards of
  the namespaces at work, each on the worker that holds it (no fan-out to other tenants).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from sqlalchemy import text

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.distribute import distribute, tenant_tables
from gql_memory.db.migrate import upgrade
from gql_memory.embeddings.hashed import HashEmbedder
from gql_memory.keys import ApiKeyStore
from gql_memory.memory.embedding_config import reembed
from tests.citus.cluster import Cluster, Node
from tests.citus.conftest import ROLE, create_citus_database, drop_citus_database
from tests.conftest import LiveServer, private_temp_dir, serving, truncate_all
from tests.db.test_statement_routing import _http_workload, library_writes
from tests.test_readme_tour import test_every_tour_example_runs_in_order_on_a_fresh_database

__all__ = ["test_every_tour_example_runs_in_order_on_a_fresh_database"]

GQL_MEMORY = Path(sys.executable).parent / "gql-memory"
SHARD = re.compile(r"\b([a-z_]+)_(\d{6,})\b")
LIBRARY_NAMESPACE = "tenant_b"  # library_writes's
# the reads of insights and episodes with their supersedes array (insights.py, episodes.py)
SUPERSEDES_READ = "(SELECT array_agg(p.id ORDER BY p.id) AS array_agg"
FANNED_OUT: list[str] = []  # statements of one tenant that ran on the other worker too
EMBEDDED_INSIGHTS = "SELECT count(*) FROM insights WHERE embedding IS NOT NULL"


@pytest.fixture(scope="module")
def tour_url(citus_cluster: Cluster) -> Iterator[str]:
    yield create_citus_database(citus_cluster, "tour")
    drop_citus_database(citus_cluster, "tour")


@pytest_asyncio.fixture(scope="module")
async def newcomer_server(tour_url: str) -> AsyncIterator[LiveServer]:
    """The tour's server (the default in-process e5 embedder) on a fresh database of the
    cluster, migrated and distributed before the server starts."""
    settings = Settings(database_url=tour_url, embedding_provider=None)
    owner = Database.for_maintenance(tour_url, settings)
    await upgrade(owner, 384)
    await distribute(owner, ROLE)
    await owner.dispose()
    async with serving(settings) as server:
        yield server


def worker_of(coordinator: Node, namespace: str) -> int:
    return int(
        coordinator.psql(
            "SELECT n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid) "
            "WHERE p.shardid = get_shard_id_for_distribution_column('raw_dialogue', "
            f"'{namespace}')"
        )
    )


def namespaces_on_each_worker(cluster: Cluster) -> list[str]:
    """A namespace per worker, in the workers' order."""
    found: dict[int, str] = {}
    for i in range(1000):
        namespace = f"tenant-{i}"
        found.setdefault(worker_of(cluster.coordinator, namespace), namespace)
        if len(found) == len(cluster.workers):
            break
    return [found[worker.port] for worker in cluster.workers]


def tenant_statements(worker: Node, tables: set[str]) -> dict[str, int]:
    """Each statement on a shard of a tenant table the worker ran, with its calls.

    (PostgreSQL 18's pg_stat_statements counts the same statement on two shards of a table
    as one entry, since it identifies an aliased table by its alias: which shard cannot be
    read from it, which worker can.)"""
    rows = worker.psql(
        "SELECT calls || '|' || replace(query, E'\\n', ' ') FROM pg_stat_statements "
        "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
    ).splitlines()
    found: dict[str, int] = {}
    for row in rows:
        calls, query = row.split("|", 1)
        if any(table in tables for table, _ in SHARD.findall(query)):
            found[query] = found.get(query, 0) + int(calls)
    return found


def reset_statements(cluster: Cluster) -> None:
    for worker in cluster.workers:
        worker.psql("SELECT pg_stat_statements_reset()")


@pytest_asyncio.fixture(scope="module")
async def owner_db(citus_url: str) -> AsyncIterator[Database]:
    db = Database.from_url(citus_url, Settings(db_pool_size=4, db_max_overflow=4))
    yield db
    await db.dispose()


async def test_two_tenants_workloads_run_and_each_statement_goes_to_its_tenants_worker(
    citus_cluster: Cluster, citus_settings: Settings, owner_db: Database
) -> None:
    """Each tenant's workload alone, the statement counts of every worker reset before it:
    the worker that does not hold the tenant ran none of its statements."""
    coordinator = citus_cluster.coordinator
    await truncate_all(owner_db)
    async with owner_db.read() as conn:
        tables = set(await tenant_tables(conn))
    coordinator.psql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")  # on every node
    keys = ApiKeyStore(owner_db)
    settings = citus_settings.with_overrides(
        working_memory_capacity=3, decay_delete_threshold=0.2, dashboard=False
    )
    root = private_temp_dir()
    counts: dict[str, dict[str, int]] = {}
    try:
        async with serving(settings) as api:
            for namespace in [*namespaces_on_each_worker(citus_cluster), LIBRARY_NAMESPACE]:
                reset_statements(citus_cluster)
                if namespace == LIBRARY_NAMESPACE:
                    await library_writes(owner_db, settings, root)  # reembed: below
                else:
                    key = await keys.create(namespace, "read,write")
                    await _http_workload(api.with_key(key.secret))
                home = worker_of(coordinator, namespace)
                counts[namespace] = {}
                for worker in citus_cluster.workers:
                    ran = tenant_statements(worker, tables)
                    counts[namespace][worker.name] = sum(ran.values())
                    if worker.port == home:
                        assert ran, f"{namespace}'s statements did not reach {worker.name}"
                        continue
                    FANNED_OUT.extend(sql for sql in ran if SUPERSEDES_READ in sql)
                    # the server's background look for rows waiting for their vectors reads
                    # every namespace on purpose (memory/waiting.py): no tenant's statement
                    elsewhere = [
                        sql
                        for sql in ran
                        if SUPERSEDES_READ not in sql and "WHERE embedding_waiting" not in sql
                    ]
                    assert not elsewhere, (
                        f"{namespace} lives on port {home}, yet {worker.name} ran:\n"
                        + "\n".join(elsewhere)
                    )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"statement calls on each worker, per tenant's workload: {counts}")


def test_the_supersedes_reads_reach_only_their_tenants_worker() -> None:
    assert not FANNED_OUT, "\n".join(FANNED_OUT)


async def test_reembed_swaps_columns_and_rebuilds_indexes_on_the_distributed_tables(
    owner_db: Database, citus_cluster: Cluster
) -> None:
    dim = Settings().hash_embedding_dim
    async with owner_db.read() as conn:
        before = await conn.scalar(
            text("SELECT count(*) FROM insights WHERE embedding IS NOT NULL")
        )
    assert before
    await reembed(owner_db, HashEmbedder(16), batch_size=2)
    for worker in citus_cluster.workers:
        types = worker.psql(
            "SET citus.show_shards_for_app_name_prefixes = '*'; "
            "SELECT DISTINCT format_type(atttypid, atttypmod) FROM pg_attribute a "
            "JOIN pg_class c ON c.oid = a.attrelid WHERE c.relname ~ '^insights_[0-9]+$' "
            "AND a.attname = 'embedding'"
        )
        assert types == "vector(16)", worker.name
    await reembed(owner_db, HashEmbedder(dim), batch_size=64)  # back, for the later tests
    async with owner_db.read() as conn:
        after = await conn.scalar(text(EMBEDDED_INSIGHTS))
    assert after == before


def test_keys_are_managed_on_the_coordinator(citus_url: str) -> None:
    env = {**os.environ, "DATABASE_URL": citus_url, "GQL_MEMORY_LOG_LEVEL": "WARNING"}

    def gql_memory(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(GQL_MEMORY), *args], env=env, capture_output=True, text=True, timeout=300
        )

    created = gql_memory("keys", "create", "--namespace", "keys-on-citus", "--scopes", "read")
    assert created.returncode == 0, created.stderr
    listed = gql_memory("keys", "list")
    assert "keys-on-citus" in listed.stdout, listed.stdout
