"""Refusals that only the operator can fix are named: in the server's log, the cause and
what to do; to the client, that the server's database is misconfigured (not "unavailable;
try again", and no SQL or tenant data). Each is provoked on the cluster, then undone."""

from __future__ import annotations

import logging

import pytest

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.engine import MISCONFIGURED_MESSAGE
from gql_memory.keys import ApiKeyStore
from tests.citus.cluster import Cluster
from tests.citus.conftest import ROLE
from tests.conftest import serving

ADD = 'mutation($c: String!) { addWorkingMemory(input: {content: $c, sessionId: "s"}) { addedId } }'
SEARCH = "{ insights(first: 1) { edges { node { id } } } }"
NAMESPACE = "misconfigured-tenant"
SECRET = "tenant-secret-text"


async def refusal(citus_settings: Settings, citus_url: str, query: str) -> dict[str, object]:
    owner = Database.from_url(citus_url, Settings(db_pool_size=2, db_max_overflow=0))
    try:
        key = await ApiKeyStore(owner).create(NAMESPACE, "read,write")
    finally:
        await owner.dispose()
    async with serving(citus_settings) as server:  # a new pool: new connections to workers
        body = await server.with_key(key.secret).graphql(query, {"c": SECRET})
    (error,) = body["errors"]
    return error


@pytest.mark.provokes_errors
@pytest.mark.parametrize(
    ("provoke", "undo", "query", "cause", "remedy"),
    [
        (
            f'ALTER ROLE "{ROLE}" NOLOGIN',
            f'ALTER ROLE "{ROLE}" LOGIN',
            SEARCH,
            "is not permitted to log in",
            "give it LOGIN on every node",
        ),
        (
            f'REVOKE EXECUTE ON FUNCTION gql_memory_name_namespace(text) FROM "{ROLE}"',
            f'GRANT EXECUTE ON FUNCTION gql_memory_name_namespace(text) TO "{ROLE}"',
            ADD,
            "permission denied for function gql_memory_name_namespace",
            "the request role lacks a privilege",
        ),
    ],
    ids=["role-cannot-log-in-on-the-workers", "privilege-missing"],
)
async def test_a_refusal_only_the_operator_can_fix_is_named(
    citus_cluster: Cluster,
    citus_settings: Settings,
    citus_url: str,
    caplog: pytest.LogCaptureFixture,
    provoke: str,
    undo: str,
    query: str,
    cause: str,
    remedy: str,
) -> None:
    coordinator = citus_cluster.coordinator
    coordinator.psql(provoke)  # propagated to the workers
    try:
        with caplog.at_level(logging.ERROR, logger="gql_memory.db.engine"):
            error = await refusal(citus_settings, citus_url, query)
    finally:
        coordinator.psql(undo)
    assert error["message"] == MISCONFIGURED_MESSAGE, error
    assert error["extensions"]["code"] == "SERVICE_UNAVAILABLE", error  # type: ignore[index]
    assert "retryAfterMs" not in error["extensions"], error  # type: ignore[operator]
    logged = [r.getMessage() for r in caplog.records if r.name == "gql_memory.db.engine"]
    assert any(cause in line and remedy in line for line in logged), logged
    assert not any(SECRET in line for line in logged), logged
