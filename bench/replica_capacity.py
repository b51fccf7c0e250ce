"""Capacity of one primary and one streaming replica on this machine (docs/scaling.md).

    python -m bench.replica_capacity                  # writes its section of docs/scaling.md
    python -m bench.replica_capacity --seconds 20 --clients 32

A dedicated embedded primary and its hot standby (tests/replica.py: `pg_basebackup -R`,
`pg_ctl`, Unix sockets only), seeded with insights. For each configuration (the primary
alone, then primary + replica via GQL_MEMORY_READ_DATABASE_URL) and worker count, a real
`gql-memory serve` answers concurrent HTTP clients for a fixed time: working-memory adds
(mutations, on the primary), searches (queries: on the replica when there is one), and a mix
where every client reads after its own last write (X-Read-After-LSN). Hash embeddings, so
that the database and the server are measured, not the embedding model; no rate limit.
Everything, load generator included, shares this machine's cores: a replica on the same
cores adds work (WAL replay) rather than capacity; on its own machine it adds its cores.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import re
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from sqlalchemy import text

from bench.common import DOCS, percentile, server, vacuum_analyze, write_section
from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.memory import Memory
from gql_memory.memory.insights import InsightInput
from tests.conftest import private_temp_dir
from tests.replica import ReplicaPair, remove, start_pair

RESULTS = DOCS / "scaling.md"
SECTION = "## Measured: one primary and one replica on this machine"
ADD = (
    "mutation($c: String!, $s: String!) { addWorkingMemory(input: {content: $c, sessionId: $s})"
    " { addedId } }"
)
SEARCH = "query($q: String!) { search(query: $q, topK: 10) { id fusedScore } }"
WORDS = (
    "deploy rollback database index replica primary vacuum latency query budget agent memory "
    "session tool error retry timeout cache embedding vector graph episode insight user "
    "preference schema migration backup restore tenant namespace worker queue"
).split()
INSIGHTS = 5000
SESSIONS = 64
HNSW_BYTES = """
SELECT sum(pg_relation_size(indexrelid)) FROM pg_index JOIN pg_class c ON c.oid = indexrelid
JOIN pg_am am ON am.oid = c.relam WHERE indrelid = 'insights'::regclass AND am.amname = 'hnsw'
"""
CLIENT_BACKENDS = (
    "SELECT count(*) - 1 FROM pg_stat_activity WHERE backend_type = 'client backend' "
    "AND datname = current_database()"
)

Request = Callable[[httpx.AsyncClient, random.Random, dict[str, Any]], Awaitable[None]]


def sentence(rng: random.Random, words: int = 12) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


async def seed(url: str) -> float:
    """INSIGHTS insights on the primary, analyzed as autovacuum would; returns the bytes per
    row of the insights' HNSW index (what has to stay in memory for searches to be fast)."""
    settings = Settings(database_url=url, embedding_provider="hash", statement_timeout_ms=0)
    db = Database.from_url(url, settings)
    rng = random.Random(19)
    try:
        memory = Memory(db, settings)
        for _ in range(0, INSIGHTS, 250):
            await memory.insights.add_many([InsightInput(sentence(rng)) for _ in range(250)])
        await vacuum_analyze(db, "insights", "nodes", "edges")
        async with db.read() as conn:
            size = await conn.scalar(text(HNSW_BYTES))
    finally:
        await db.dispose()
    return float(size) / INSIGHTS


async def connections(url: str) -> int:
    """Client connections open on a server (the pools, LISTEN, this one)."""
    db = Database.from_url(url, Settings(database_url=url))
    try:
        async with db.read() as conn:
            return int(await conn.scalar(text(CLIENT_BACKENDS)))
    finally:
        await db.dispose()


async def add(client: httpx.AsyncClient, rng: random.Random, state: dict[str, Any]) -> None:
    variables = {"c": sentence(rng, 8), "s": f"s{rng.randrange(SESSIONS)}"}
    body = (await client.post("/graphql", json={"query": ADD, "variables": variables})).json()
    assert "errors" not in body, body
    state["lsn"] = body.get("extensions", {}).get("lsn")


async def search(client: httpx.AsyncClient, rng: random.Random, state: dict[str, Any]) -> None:
    headers = {"X-Read-After-LSN": state["lsn"]} if state.get("lsn") else {}
    body = (
        await client.post(
            "/graphql",
            json={"query": SEARCH, "variables": {"q": sentence(rng, 4)}},
            headers=headers,
        )
    ).json()
    assert "errors" not in body, body


async def mixed(client: httpx.AsyncClient, rng: random.Random, state: dict[str, Any]) -> None:
    """One write in five; every search reads after the client's own last write."""
    await (add if rng.random() < 0.2 else search)(client, rng, state)


async def measure(url: str, request: Request, clients: int, seconds: float) -> dict[str, float]:
    """Operations per second and latency percentiles of ``clients`` closed-loop clients."""
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def client_loop(index: int, client: httpx.AsyncClient) -> None:
        rng = random.Random(index)
        state: dict[str, Any] = {}
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            await request(client, rng, state)
            latencies.append(time.perf_counter() - started)

    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:
        started = time.perf_counter()
        await asyncio.gather(*(client_loop(i, client) for i in range(clients)))
        elapsed = time.perf_counter() - started
    return {
        "rate": len(latencies) / elapsed,
        "p50": percentile(latencies, 50) * 1000,
        "p95": percentile(latencies, 95) * 1000,
    }


def metric_sum(body: str, name: str, label: str | None = None) -> float:
    """The sum of a metric's samples (those whose labels contain ``label``)."""
    total = 0.0
    for match in re.finditer(rf"^{name}(\{{[^}}]*\}})? (\S+)$", body, re.M):
        if label is None or label in (match.group(1) or ""):
            total += float(match.group(2))
    return total


def run_configuration(
    pair: ReplicaPair, replica: bool, workers: int, clients: int, seconds: float
) -> dict[str, Any]:
    env = {
        "DATABASE_URL": pair.primary.url(),
        "GQL_MEMORY_EMBEDDING_PROVIDER": "hash",
        "GQL_MEMORY_RATE_LIMIT_PER_S": "0",
        "GQL_MEMORY_LOG_LEVEL": "WARNING",
    }
    if replica:
        env["GQL_MEMORY_READ_DATABASE_URL"] = pair.standby.url()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as metrics_dir:
        env["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
        with server(workers=workers, **env) as srv:
            asyncio.run(measure(srv.url, mixed, 4, 1.0))  # warm-up
            for name, request in (("adds", add), ("searches", search), ("mixed", mixed)):
                results[name] = asyncio.run(measure(srv.url, request, clients, seconds))
            body = httpx.get(f"{srv.url}/metrics", timeout=10).text
            results["connections"] = [asyncio.run(connections(pair.primary.url()))]
            if replica:
                results["connections"].append(asyncio.run(connections(pair.standby.url())))
    results["replica_reads"] = metric_sum(body, "gql_memory_db_reads_total", "/gql_memory")
    results["primary_reads"] = metric_sum(body, "gql_memory_db_reads_total", '"primary"')
    results["waits"] = metric_sum(body, "gql_memory_replica_lsn_waits_total")
    results["fallbacks"] = metric_sum(body, "gql_memory_replica_fallbacks_total")
    return results


def main(seconds: float = 8.0, clients: int = 16, workers: tuple[int, ...] = (1, 2)) -> list[str]:
    load_before = os.getloadavg()[0]
    root = private_temp_dir()
    try:
        pair = start_pair(root)
        try:
            hnsw_bytes = asyncio.run(seed(pair.primary.url()))
            runs = [
                (replica, count, run_configuration(pair, replica, count, clients, seconds))
                for count in workers
                for replica in (False, True)
            ]
        finally:
            pair.close()
    finally:
        remove(root)
    lines = [
        SECTION,
        "",
        f"Measured {time.strftime('%Y-%m-%d')} by `python -m bench.replica_capacity` on "
        f"{platform.machine()} with {os.cpu_count()} cores "
        f"(load average {load_before:.1f} when it started): primary, standby, server workers "
        f"and the load generator all ran on these cores. {INSIGHTS} insights, hash embeddings, "
        f"{clients} concurrent HTTP clients, {seconds:g} s per figure.",
        "",
        "| reads on | workers | adds/s (p50 / p95 ms) | searches/s (p50 / p95 ms) "
        "| mixed 20% writes, read-after-own-write, ops/s (p50 / p95 ms) "
        "| reads on the replica / on the primary | LSN waits / fallbacks "
        "| connections held (primary / replica) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for replica, count, r in runs:
        cells = [
            f"{r[k]['rate']:.0f} ({r[k]['p50']:.1f} / {r[k]['p95']:.1f})"
            for k in ("adds", "searches", "mixed")
        ]
        routed = f"{r['replica_reads']:.0f} / {r['primary_reads']:.0f}" if replica else "– / all"
        waits = f"{r['waits']:.0f} / {r['fallbacks']:.0f}" if replica else "–"
        where = "primary + 1 replica" if replica else "primary only"
        held = " / ".join(str(n) for n in r["connections"])
        lines.append(f"| {where} | {count} | {' | '.join(cells)} | {routed} | {waits} | {held} |")
    lines += [
        "",
        f"The insights' HNSW index (384 dimensions, m = 16) took {hnsw_bytes:,.0f} bytes per "
        "row here.",
    ]
    return lines


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    section = main(args.seconds, args.clients, tuple(args.workers))
    write_section(RESULTS, section)
    print("\n".join(section))
