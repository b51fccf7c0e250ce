"""The isolation matrix of tests/api/test_isolation.py, on the cluster: every field of every
layer, two tenants, the other tenant's ids, API keys required, 0 leaks.

The server connects to the coordinator as its owner and SETs ROLE to the request role, which
is neither superuser nor BYPASSRLS on any node: the coordinator reaches the workers as that
role, and the shards' policies see the namespace through the forwarded ``SET LOCAL``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio
from sqlalchemy import text

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.engine import write_transaction
from gql_memory.keys import ApiKeyStore
from tests.api.test_isolation import (
    MARKER,
    A,
    B,
    test_apq_registrations_never_cross_namespaces,
    test_http_streams_and_batches_never_cross_namespaces,
    test_namespace_b_never_sees_changes_or_learns_of_a,
)
from tests.citus.cluster import Cluster
from tests.citus.conftest import ROLE
from tests.conftest import LiveServer, serving, truncate_all

__all__ = [
    "test_apq_registrations_never_cross_namespaces",
    "test_http_streams_and_batches_never_cross_namespaces",
    "test_namespace_b_never_sees_changes_or_learns_of_a",
]


@pytest_asyncio.fixture(scope="module")
async def db(citus_url: str) -> AsyncIterator[Database]:
    """The coordinator as the owner (the matrix seeds sequences and snapshots rows)."""
    database = Database.from_url(citus_url, Settings(db_pool_size=4, db_max_overflow=4))
    yield database
    await database.dispose()


@pytest_asyncio.fixture(scope="module")
async def secure_live(citus_settings: Settings) -> AsyncIterator[LiveServer]:
    async with serving(citus_settings) as server:
        yield server


@pytest_asyncio.fixture
async def secure_api(secure_live: LiveServer, db: Database) -> LiveServer:
    await truncate_all(db)
    return secure_live


@pytest_asyncio.fixture
def key_store(db: Database) -> ApiKeyStore:
    return ApiKeyStore(db)


async def test_the_shards_refuse_and_hide_other_namespaces_for_the_role(
    db: Database, citus_cluster: Cluster
) -> None:
    """Row-level security measured on the shards: as the request role, a transaction of A
    (SET LOCAL forwarded to the worker) sees A's rows only and cannot write B's, whatever
    its statement says; the role is neither superuser nor BYPASSRLS on any node."""
    for node in citus_cluster.nodes:
        flags = node.psql(
            f"SELECT rolsuper, rolbypassrls, rolcanlogin FROM pg_roles WHERE rolname = '{ROLE}'"
        )
        assert flags == "f|f|t", node.name
    await truncate_all(db)
    for namespace in (A, B):
        async with db.write() as conn:
            await conn.execute(
                text(
                    "INSERT INTO raw_dialogue (namespace, session_id, speaker, content) "
                    "VALUES (:ns, 's', 'user', :c)"
                ),
                {"ns": namespace, "c": f"{MARKER} of {namespace}"},
            )
    as_role = Database.from_url(db.engine.url.render_as_string(False), Settings(), role=ROLE)
    try:
        async with as_role.read(A) as conn:
            seen = (await conn.execute(text("SELECT namespace FROM raw_dialogue"))).scalars()
            assert list(seen) == [A]
            other = await conn.scalar(
                text("SELECT count(*) FROM raw_dialogue WHERE namespace = :ns"), {"ns": B}
            )
            assert other == 0
        async with write_transaction(as_role.engine, namespace=A) as conn:
            refused = await conn.execute(
                text("SELECT count(*) FROM raw_dialogue WHERE namespace = :ns"), {"ns": A}
            )
            assert refused.scalar() == 1
        try:
            async with write_transaction(as_role.engine, namespace=A) as conn:
                await conn.execute(
                    text(
                        "INSERT INTO raw_dialogue (namespace, session_id, speaker, content) "
                        "VALUES (:ns, 's', 'user', 'x')"
                    ),
                    {"ns": B},
                )
        except Exception as exc:  # noqa: BLE001 - the policy's refusal, from the worker
            assert "row-level security" in str(exc), exc
        else:
            raise AssertionError("A's transaction wrote a row of B on the shard")
        async with as_role.read() as conn:  # no namespace named: nothing at all
            assert await conn.scalar(text("SELECT count(*) FROM raw_dialogue")) == 0
    finally:
        await as_role.dispose()
