"""One Citus cluster for every test under tests/citus/: a coordinator and two workers.

Citus is built from the source tarball once per machine (``tests/citus/build.py``); without
a tarball these tests skip, saying how to get one. The session migrates the coordinator's
``gql_memory`` database and distributes it with ``gql-memory distribute``'s code; each test
module works in namespaces of its own. ``tests/conftest.py`` keeps every file of this folder
on one xdist worker (one cluster, not one per worker).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
from sqlalchemy import text

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.distribute import distribute
from gql_memory.db.migrate import upgrade
from tests.citus.build import SourceMissing, citus_pginstall, source_tarball
from tests.citus.cluster import Cluster
from tests.conftest import private_temp_dir

ROLE = "gql_memory_app"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "provokes_errors: the test makes the server log ERROR lines on purpose"
    )


@pytest.fixture(autouse=True)
def no_error_logged(
    request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> Iterator[None]:
    """No ERROR line from gql_memory while a cluster test runs, unless it provokes them."""
    with caplog.at_level(logging.INFO):
        yield
    if request.node.get_closest_marker("provokes_errors"):
        return
    errors = [
        f"{r.name}: {r.getMessage()}"
        for r in caplog.get_records("call")
        if r.levelno >= logging.ERROR and r.name.startswith("gql_memory")
    ]
    assert not errors, errors


@pytest.fixture(scope="session")
def citus_cluster() -> Iterator[Cluster]:
    try:
        tarball = source_tarball()
    except SourceMissing as exc:
        print(f"SKIPPED: {exc}")
        pytest.skip(str(exc))
    pginstall = citus_pginstall(tarball)
    root = private_temp_dir()
    cluster = Cluster.start(pginstall, root)
    yield cluster
    cluster.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest_asyncio.fixture(scope="session")
async def citus_url(citus_cluster: Cluster) -> AsyncIterator[str]:
    """The coordinator's database as its owner: migrated, then distributed."""
    url = citus_cluster.coordinator.tcp_url()
    owner = Database.for_maintenance(url, Settings())
    await upgrade(owner, Settings().hash_embedding_dim)
    await distribute(owner, ROLE)
    await owner.dispose()
    yield url


@pytest.fixture(scope="session")
def citus_settings(citus_url: str) -> Settings:
    """A server on the coordinator, API keys required; requests SET ROLE to the role."""
    return Settings(
        database_url=citus_url,
        db_pool_size=10,
        db_max_overflow=10,
        auth="required",
        api_key_cache_ttl_s=0.3,
    )


@pytest_asyncio.fixture(scope="session")
async def owner(citus_url: str) -> AsyncIterator[Database]:
    """The coordinator as the owner (migrations, admin reads; not subject to the policies)."""
    db = Database.for_maintenance(citus_url, Settings())
    yield db
    await db.dispose()


def create_citus_database(cluster: Cluster, name: str) -> str:
    """A new database on every node with the citus and vector extensions, its workers added
    on the coordinator; the owner's URL of it on the coordinator."""
    coordinator = cluster.coordinator
    for node in cluster.nodes:
        node.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)", database="postgres")
        node.psql(f"CREATE DATABASE {name}", database="postgres")
        node.psql("CREATE EXTENSION citus; CREATE EXTENSION vector", database=name)
    coordinator.psql(f"SELECT citus_set_coordinator_host('127.0.0.1', {coordinator.port})", name)
    for worker in cluster.workers:
        coordinator.psql(f"SELECT citus_add_node('127.0.0.1', {worker.port})", name)
    return coordinator.tcp_url(name)


def drop_citus_database(cluster: Cluster, name: str) -> None:
    for node in cluster.nodes:
        node.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)", database="postgres")


async def scalar(db: Database, sql: str, **params: Any) -> Any:
    async with db.write() as conn:
        return await conn.scalar(text(sql), params)
