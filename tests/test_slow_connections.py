"""Slow or idle clients cannot hold `gql-memory serve`: header and body deadlines and a
connection cap.

The server runs as a real process with a small cap and short deadlines. Connections that send
nothing, half their headers or half their body fill the cap; the server must shed them by
itself (the test never closes them) while a keyed client, retrying on 503, gets its answer.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from gql_memory.config import Settings
from gql_memory.keys import ApiKeyStore
from gql_memory.server.connections import FILES_RESERVED, connection_limits
from tests.processes import ServeProcess, wait_until

CAP = 6
EXTRA = 3  # connections past the cap
DEADLINE_S = 2  # of the headers and of the body
HALF_SENT = b"POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
HALF_A_BODY = HALF_SENT + b"Content-Length: 100\r\n\r\n" + b'{"query": "'
COUNT = "{ stats { rawDialogue } }"


async def slow_client(port: int, sends: bytes) -> asyncio.Task[bytes]:
    """A connection that sends ``sends`` (perhaps nothing) and never more; the task reads
    what the server answers until the server closes the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(sends)
    await writer.drain()

    async def answer() -> bytes:
        try:
            # generous: only turns a connection the server never closes into a failure
            return await asyncio.wait_for(reader.read(), timeout=30)
        finally:
            writer.close()

    return asyncio.create_task(answer())


def status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


async def test_slow_connections_are_shed_and_a_keyed_request_still_succeeds(
    scratch_dir: Path, database_url: str, key_store: ApiKeyStore
) -> None:
    key = (await key_store.create("slow-clients", "read")).secret
    serve = ServeProcess(
        scratch_dir / "data",
        env={
            "DATABASE_URL": database_url,  # the module's migrated database: a quick start
            "GQL_MEMORY_AUTH": "required",
            "GQL_MEMORY_MAX_CONNECTIONS": str(CAP),
            "GQL_MEMORY_HEADER_TIMEOUT_S": str(DEADLINE_S),
            "GQL_MEMORY_BODY_TIMEOUT_S": str(DEADLINE_S),
        },
    ).start()
    try:
        # the cap filled by connections that send nothing, half their headers, half a body ...
        held = [await slow_client(serve.port, b"") for _ in range(CAP // 3)]
        held += [await slow_client(serve.port, HALF_SENT) for _ in range(CAP // 3)]
        held += [await slow_client(serve.port, HALF_A_BODY) for _ in range(CAP - 2 * (CAP // 3))]
        # ... and more of them, past the cap
        extra = [await slow_client(serve.port, HALF_SENT) for _ in range(EXTRA)]
        async with httpx.AsyncClient(
            base_url=serve.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=30
        ) as client:
            refused = await client.post("/graphql", json={"query": COUNT})
            assert refused.status_code == 503, refused.text
            assert refused.headers["retry-after"] == "1"

            async def keyed_request_succeeds() -> bool:
                response = await client.post("/graphql", json={"query": COUNT})
                return response.status_code == 200 and "errors" not in response.json()

            # the slow connections go at their header deadline; nothing here closes them
            await wait_until(keyed_request_succeeds, timeout=60, interval=0.1)

        extra_answers = await asyncio.gather(*extra)
        assert [status(a) for a in extra_answers] == [503] * EXTRA, extra_answers
        assert all(b"\r\nretry-after: 1\r\n" in a for a in extra_answers)
        # every held connection was closed by the server (EOF): slow headers with a 408, a
        # slow body without an answer (its request had begun). The connection of the ready
        # check may still have counted, pushing one of them past the cap: 503.
        held_statuses = [status(a) for a in await asyncio.gather(*held)]
        slow_headers, slow_body = held_statuses[: 2 * (CAP // 3)], held_statuses[2 * (CAP // 3) :]
        assert set(slow_headers) <= {408, 503} and set(slow_body) <= {0, 503}, held_statuses
        assert held_statuses.count(503) <= 1, held_statuses
    finally:
        serve.stop()
    assert serve.wait() == 0, serve.log()[-3000:]


def test_the_cap_is_lowered_to_fit_the_open_files_limit() -> None:
    settings = Settings(max_connections=5000, db_pool_size=10, db_max_overflow=10)
    pool = 10 + 10
    assert connection_limits(settings, 1024).max_connections == 1024 - FILES_RESERVED - pool
    assert connection_limits(settings, 100_000).max_connections == 5000
    with_replica = settings.with_overrides(read_database_url="postgresql+asyncpg://replica/db")
    assert connection_limits(with_replica, 1024).max_connections == 1024 - FILES_RESERVED - 2 * pool
