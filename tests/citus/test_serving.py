"""Operations while serving: one worker stopped and started again under a running server.

Tenants on the stopped worker get SERVICE_UNAVAILABLE with ``retryAfterMs``; tenants on the
other worker are served throughout; once the worker is back, its tenants are served again by
the same server, without a restart.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from sqlalchemy import text

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.keys import ApiKeyStore
from tests.citus.cluster import Cluster
from tests.citus.test_operations import namespaces_on_each_worker, worker_of
from tests.conftest import HANG_GUARD_S, LiveServer, serving

ADD = 'mutation($c: String!) { addWorkingMemory(input: {content: $c, sessionId: "s"}) { addedId } }'
READ = '{ workingMemory(sessionId: "s") { id } }'
STORE = (
    "mutation($c: String!, $s: String!) { storeRawDialogue(input: {sessionId: $s, "
    'speaker: "user", content: $c}) { id } }'
)


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


MOVING = "moving-tenant"
# A guard, not a measurement: a move that cannot finish fails the test instead of hanging it.
MOVE_TIMEOUT = "240s"
WRITERS = 4


async def test_a_tenant_moved_to_a_shard_of_its_own_on_the_other_worker_while_writing(
    citus_cluster: Cluster, citus_settings: Settings, citus_url: str
) -> None:
    """isolate_tenant_to_new_shard, then citus_move_shard_placement, while clients add to
    the tenant's working memory and store its turns: every acknowledged write is there
    afterwards (an added item in working memory, or archived to stale memory by its decay),
    and a client saw at most SERVICE_UNAVAILABLE (retryable)."""
    coordinator = citus_cluster.coordinator
    source = worker_of(coordinator, MOVING)
    (target,) = [w.port for w in citus_cluster.workers if w.port != source]
    owner = Database.from_url(citus_url, Settings(db_pool_size=2, db_max_overflow=0))
    keys = ApiKeyStore(owner)
    acknowledged: list[str] = []
    refused: list[dict[str, Any]] = []
    moved = asyncio.Event()
    try:
        async with serving(citus_settings.with_overrides(working_memory_capacity=1000)) as server:
            api = server.with_key((await keys.create(MOVING, "read,write")).secret)

            async def write(writer: int) -> None:
                n = 0
                while not moved.is_set() or n < 5:
                    content = f"w{writer}-{n}"
                    if n % 2:
                        query = STORE
                        variables = {"c": content, "s": f"s{writer}"}
                    else:
                        query, variables = ADD, {"c": content}
                    while True:  # as a client does: a retryable refusal is sent again
                        body = await api.graphql(query, variables)
                        if "errors" not in body:
                            acknowledged.append(content)
                            break
                        refused.extend(body["errors"])
                        if body["errors"][0]["extensions"].get("code") != "SERVICE_UNAVAILABLE":
                            break
                    n += 1

            async def move() -> None:
                try:
                    await asyncio.to_thread(
                        coordinator.psql,
                        f"SET statement_timeout = '{MOVE_TIMEOUT}'; "
                        "SELECT isolate_tenant_to_new_shard('raw_dialogue', "
                        f"'{MOVING}', 'CASCADE', shard_transfer_mode => 'block_writes')",
                    )
                    shard = coordinator.psql(
                        f"SELECT get_shard_id_for_distribution_column('raw_dialogue', '{MOVING}')"
                    )
                    await asyncio.to_thread(
                        coordinator.psql,
                        f"SET statement_timeout = '{MOVE_TIMEOUT}'; "
                        f"SELECT citus_move_shard_placement({shard}, '127.0.0.1', {source}, "
                        f"'127.0.0.1', {target}, shard_transfer_mode => 'block_writes')",
                    )
                finally:
                    moved.set()

            await asyncio.wait_for(
                asyncio.gather(move(), *(write(i) for i in range(WRITERS))), HANG_GUARD_S * 5
            )
            stored = await api.data('{ workingMemory(sessionId: "s") { content } }')
            async with owner.read() as conn:
                rows = await conn.execute(
                    text(
                        "SELECT content FROM working_memory WHERE namespace = :ns UNION ALL "
                        "SELECT original_content FROM stale_memory WHERE namespace = :ns "
                        "UNION ALL SELECT content FROM raw_dialogue WHERE namespace = :ns"
                    ),
                    {"ns": MOVING},
                )
                present = set(rows.scalars())
    finally:
        await owner.dispose()
    assert worker_of(coordinator, MOVING) == target
    assert {error["extensions"]["code"] for error in refused} <= {"SERVICE_UNAVAILABLE"}, refused
    lost = [content for content in acknowledged if content not in present]
    print(f"moved while writing: {len(acknowledged)} acknowledged, {len(refused)} refused")
    assert acknowledged and not lost, lost
    assert stored["workingMemory"]
