"""Operations while serving: one worker stopped and started again under a running server.

Tenants on the stopped worker get SERVICE_UNAVAILABLE with ``retryAfterMs``; tenants on the
other worker are served throughout; once the worker is back, its tenants are served again by
the same server, without a restart.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.keys import ApiKeyStore
from tests.citus.cluster import Cluster
from tests.citus.test_operations import namespaces_on_each_worker
from tests.conftest import HANG_GUARD_S, LiveServer, serving

ADD = 'mutation($c: String!) { addWorkingMemory(input: {content: $c, sessionId: "s"}) { addedId } }'
READ = '{ workingMemory(sessionId: "s") { id } }'


async def answer(api: LiveServer, query: str, variables: dict[str, Any] | None = None) -> Any:
    return await api.graphql(query, variables)


async def test_a_stopped_worker_fails_only_its_tenants_with_a_retryable_code(
    citus_cluster: Cluster, citus_settings: Settings, citus_url: str
) -> None:
    on_first, on_second = namespaces_on_each_worker(citus_cluster)
    second_worker = citus_cluster.workers[1]
    owner = Database.from_url(citus_url, Settings(db_pool_size=2, db_max_overflow=0))
    keys = ApiKeyStore(owner)
    try:
        async with serving(citus_settings) as server:
            served = server.with_key((await keys.create(on_first, "read,write")).secret)
            stranded = server.with_key((await keys.create(on_second, "read,write")).secret)
            for api in (served, stranded):
                body = await answer(api, ADD, {"c": "before"})
                assert "errors" not in body, body
            second_worker.stop("fast")
            try:
                for query, variables in ((ADD, {"c": "while down"}), (READ, None)):
                    body = await answer(stranded, query, variables)
                    (error,) = body["errors"]
                    assert error["extensions"]["code"] == "SERVICE_UNAVAILABLE", error
                    assert error["extensions"]["retryAfterMs"] > 0, error
                    body = await answer(served, query, variables)
                    assert "errors" not in body, body
            finally:
                second_worker.start()
            deadline = time.monotonic() + HANG_GUARD_S
            while True:  # the pool's connections to the worker are replaced as they fail
                body = await answer(stranded, ADD, {"c": "after"})
                if "errors" not in body:
                    break
                assert body["errors"][0]["extensions"]["code"] == "SERVICE_UNAVAILABLE", body
                assert time.monotonic() < deadline, body
                await asyncio.sleep(0.2)
            items = await answer(stranded, READ)
            assert len(items["data"]["workingMemory"]) == 2, items  # before, after
    finally:
        await owner.dispose()
