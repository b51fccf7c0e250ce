"""Two `gql-memory serve` processes on one database: events and metrics cross processes.

A subscriber connected to server A hears of writes made through server B (LISTEN/NOTIFY),
never of another namespace's, never of a rolled-back write; /metrics on A adds up both
servers (prometheus-client multiprocess mode, one shared PROMETHEUS_MULTIPROC_DIR).
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.memory import Memory
from tests.conftest import truncate_all
from tests.live import GraphQLWS, wait_for_subscriptions

STARTUP_TIMEOUT_S = 30
MEMORY_EVENTS = "subscription { memoryEvents(kinds: [ADDED]) { kind itemId sessionId } }"
ADD = """
mutation($c: String!, $s: String!) {
  addWorkingMemory(input: {content: $c, sessionId: $s}) { addedId }
}
"""


@dataclass
class Server:
    """One `gql-memory serve` subprocess."""

    process: subprocess.Popen[bytes]
    base_url: str
    log: Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(database_url: str, metrics_dir: Path, log: Path) -> Server:
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
        "GQL_MEMORY_LOG_LEVEL": "WARNING",
    }
    env.pop("GQL_MEMORY_CONFIG", None)
    command = [sys.executable, "-m", "gql_memory", "serve", "--host", "127.0.0.1"]
    process = subprocess.Popen(
        [*command, "--port", str(port)], env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT
    )
    return Server(process, f"http://127.0.0.1:{port}", log)


async def wait_until_healthy(client: httpx.AsyncClient, server: Server) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while True:
        assert server.process.poll() is None, f"server exited:\n{server.log.read_text()}"
        assert time.monotonic() < deadline, f"server did not start:\n{server.log.read_text()}"
        try:
            if (await client.get(f"{server.base_url}/healthz")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.1)


def stop(server: Server) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


@pytest.fixture(scope="module")
def servers(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Server]]:
    """Servers A and B, started side by side."""
    tmp = tmp_path_factory.mktemp("scale_out")
    started = [start_server(database_url, tmp / "metrics", tmp / f"{n}.log") for n in "AB"]
    yield started
    for server in started:
        stop(server)


@pytest_asyncio.fixture
async def client(servers: list[Server], db: Database) -> AsyncIterator[httpx.AsyncClient]:
    await truncate_all(db)
    async with httpx.AsyncClient(timeout=30) as client:
        for server in servers:
            await wait_until_healthy(client, server)
        yield client


async def add(client: httpx.AsyncClient, server: Server, content: str, session: str = "s") -> str:
    response = await client.post(
        f"{server.base_url}/graphql", json={"query": ADD, "variables": {"c": content, "s": session}}
    )
    body = response.json()
    assert "errors" not in body, body
    return str(body["data"]["addWorkingMemory"]["addedId"])


async def test_a_write_on_one_server_reaches_a_subscriber_on_the_other(
    servers: list[Server], client: httpx.AsyncClient
) -> None:
    a, b = servers
    delays = []
    async with GraphQLWS.connect(client, a.base_url) as ws:
        await ws.subscribe(MEMORY_EVENTS)
        await wait_for_subscriptions(client, a.base_url, "memoryEvents")
        for i in range(20):
            sent = time.perf_counter()
            added_id = await add(client, b, f"written on B {i}")
            event = (await ws.next_data())["memoryEvents"]
            delays.append(time.perf_counter() - sent)
            assert event == {"kind": "ADDED", "itemId": added_id, "sessionId": "s"}
    print(
        f"\nB write -> A subscriber, 20 events: median {statistics.median(delays) * 1000:.1f} ms,"
        f" max {max(delays) * 1000:.1f} ms"
    )


async def test_other_namespaces_and_rolled_back_writes_never_arrive(
    servers: list[Server], client: httpx.AsyncClient, db: Database, settings: Settings
) -> None:
    a, b = servers
    async with GraphQLWS.connect(client, a.base_url) as ws:
        await ws.subscribe(MEMORY_EVENTS)
        await wait_for_subscriptions(client, a.base_url, "memoryEvents")
        await Memory(db, settings, "tenant-b").working.add("tenant B writes", session_id="s")
        with pytest.raises(RuntimeError):
            async with db.write() as conn:
                await Memory(db, settings).working.add_in(conn, content="rolled back")
                raise RuntimeError("abort")
        added_id = await add(client, b, "default namespace, committed last")
        event = (await ws.next_data())["memoryEvents"]
        assert event["itemId"] == added_id  # the first event A delivers is B's commit


async def test_metrics_on_one_server_add_up_both_servers(
    servers: list[Server], client: httpx.AsyncClient
) -> None:
    a, b = servers

    async def add_requests(server: Server) -> float:
        text = (await client.get(f"{server.base_url}/metrics")).text
        match = re.search(
            r'^gql_memory_graphql_requests_total\{operation="addWorkingMemory",'
            r'type="mutation"\} (\S+)$',
            text,
            re.M,
        )
        return float(match.group(1)) if match else 0.0

    before = await add_requests(a)
    for i in range(5):
        await add(client, b, f"counted on B {i}")
    assert await add_requests(a) == before + 5  # A answered none of them
    assert await add_requests(b) == before + 5
