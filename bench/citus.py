"""A Citus coordinator and two workers against one embedded PostgreSQL, same data, same run
(docs/scaling.md, step 5).

    python -m bench.citus                  # writes its section of docs/scaling.md
    python -m bench.citus --seconds 20 --clients 32

Citus is built from the shared tarball as the suite builds it (tests/citus/build.py, cached);
the cluster runs on this machine's loopback (tests/citus/cluster.py), is migrated and
distributed with `gql-memory distribute`'s code. Both databases get the same seeded tenants
(insights with hash embeddings and a graph each) and API keys; a real `gql-memory serve`
answers concurrent HTTP clients, each request for a random tenant: working-memory adds,
hybrid searches, 2-hop neighbours. Then each worker's pg_stat_statements says how many
statement calls it ran, and the coordinator which tenants each worker holds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import shutil
import time
from typing import Any

import httpx
from sqlalchemy import text

from bench.common import DOCS, percentile, server, write_section
from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.distribute import distribute
from gql_memory.db.embedded import start_embedded
from gql_memory.db.migrate import upgrade
from gql_memory.keys import ApiKeyStore
from gql_memory.memory import Memory
from gql_memory.memory.insights import InsightInput
from tests.citus.build import citus_pginstall, source_tarball
from tests.citus.cluster import Cluster
from tests.conftest import private_temp_dir

RESULTS = DOCS / "scaling.md"
SECTION = "## Measured: a Citus coordinator and two workers on this machine"
TENANTS = 8
INSIGHTS_PER_TENANT = 1000
NODES_PER_TENANT = 500
EDGES_PER_TENANT = 2000
SESSIONS = 32
WORDS = (
    "deploy rollback database index replica primary vacuum latency query budget agent memory "
    "session tool error retry timeout cache embedding vector graph episode insight user "
    "preference schema migration backup restore tenant namespace worker queue"
).split()
ADD = (
    "mutation($c: String!, $s: String!) { addWorkingMemory(input: {content: $c, sessionId: $s})"
    " { addedId } }"
)
SEARCH = "query($q: String!) { search(query: $q, topK: 10) { id fusedScore } }"
NEIGHBORS = (
    "query($n: ID!) { neighbors(nodeId: $n, depth: 2, direction: BOTH) { distance node { id } } }"
)
TENANT_CALLS = (
    "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE dbid = "
    "(SELECT oid FROM pg_database WHERE datname = current_database()) AND query ~ "
    "'(raw_dialogue|working_memory|stale_memory|insights|episodes|session_state|nodes|edges)"
    "_[0-9]+'"
)


def namespace(index: int) -> str:
    return f"tenant-{index}"


def sentence(rng: random.Random, words: int = 12) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


async def seed(url: str) -> dict[str, Any]:
    """The tenants' insights and graphs, and a key each; returns the keys and node ids."""
    settings = Settings(database_url=url, embedding_provider="hash", statement_timeout_ms=0)
    db = Database.from_url(url, settings)
    rng = random.Random(31)
    tenants: dict[str, Any] = {}
    try:
        for index in range(TENANTS):
            ns = namespace(index)
            memory = Memory(db, settings, ns)
            for _ in range(0, INSIGHTS_PER_TENANT, 250):
                await memory.insights.add_many([InsightInput(sentence(rng)) for _ in range(250)])
            async with db.write() as conn:
                ids = sorted(
                    (
                        await conn.execute(
                            text(
                                "INSERT INTO nodes (namespace, label, name) SELECT :ns, 'N', "
                                "'node ' || g FROM generate_series(1, :n) g RETURNING id"
                            ),
                            {"ns": ns, "n": NODES_PER_TENANT},
                        )
                    ).scalars()
                )
                pairs = {
                    (rng.randrange(len(ids)), rng.randrange(len(ids)))
                    for _ in range(EDGES_PER_TENANT)
                }
                pairs = {(s, t) for s, t in pairs if s != t}
                await conn.execute(
                    text(
                        "INSERT INTO edges (namespace, source_id, target_id, relation) "
                        "SELECT :ns, s, t, 'R' FROM unnest(CAST(:s AS bigint[]), "
                        "CAST(:t AS bigint[])) AS e(s, t)"
                    ),
                    {"ns": ns, "s": [ids[s] for s, _ in pairs], "t": [ids[t] for _, t in pairs]},
                )
            key = await ApiKeyStore(db).create(ns, "read,write")
            tenants[ns] = {"key": key.secret, "nodes": ids}
        async with db.write() as conn:
            for table in ("insights", "nodes", "edges"):
                await conn.execute(text(f"ANALYZE {table}"))
    finally:
        await db.dispose()
    return tenants


async def measure(
    url: str, tenants: dict[str, Any], kind: str, clients: int, seconds: float
) -> dict[str, float]:
    """Requests per second and latency percentiles of ``clients`` closed-loop clients."""
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds
    names = sorted(tenants)

    async def client_loop(index: int, client: httpx.AsyncClient) -> None:
        rng = random.Random(index)
        while time.perf_counter() < deadline:
            ns = rng.choice(names)
            if kind == "adds":
                query, variables = ADD, {"c": sentence(rng, 8), "s": f"s{rng.randrange(SESSIONS)}"}
            elif kind == "searches":
                query, variables = SEARCH, {"q": sentence(rng, 4)}
            else:
                query, variables = NEIGHBORS, {"n": rng.choice(tenants[ns]["nodes"])}
            headers = {"Authorization": f"Bearer {tenants[ns]['key']}"}
            started = time.perf_counter()
            response = await client.post(
                "/graphql", json={"query": query, "variables": variables}, headers=headers
            )
            latencies.append(time.perf_counter() - started)
            body = response.json()
            assert "errors" not in body, body

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


def run_configuration(
    url: str, tenants: dict[str, Any], clients: int, seconds: float
) -> dict[str, dict[str, float]]:
    env = {
        "DATABASE_URL": url,
        "GQL_MEMORY_EMBEDDING_PROVIDER": "hash",
        "GQL_MEMORY_RATE_LIMIT_PER_S": "0",
        "GQL_MEMORY_LOG_LEVEL": "WARNING",
    }
    results = {}
    with server(workers=1, **env) as srv:
        asyncio.run(measure(srv.url, tenants, "searches", 4, 1.0))  # warm-up
        for kind in ("adds", "searches", "neighbors"):
            results[kind] = asyncio.run(measure(srv.url, tenants, kind, clients, seconds))
    return results


def placement(cluster: Cluster) -> dict[str, list[str]]:
    """The tenants each worker holds."""
    held: dict[str, list[str]] = {worker.name: [] for worker in cluster.workers}
    ports = {str(worker.port): worker.name for worker in cluster.workers}
    for index in range(TENANTS):
        port = cluster.coordinator.psql(
            "SELECT n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid) "
            "WHERE p.shardid = get_shard_id_for_distribution_column('raw_dialogue', "
            f"'{namespace(index)}')"
        )
        held[ports[port]].append(namespace(index))
    return held


def main(seconds: float = 8.0, clients: int = 16) -> list[str]:
    load_before = os.getloadavg()[0]
    root = private_temp_dir()
    root.chmod(0o711)  # the nodes run as the embedded server's user
    cluster = None
    embedded = None
    try:
        cluster = Cluster.start(citus_pginstall(source_tarball()), root / "cluster")
        citus_url = cluster.coordinator.tcp_url()
        embedded = start_embedded(root / "single")

        async def prepare() -> None:
            for url in (citus_url, embedded.url):
                owner = Database.for_maintenance(url, Settings())
                await upgrade(owner, Settings().hash_embedding_dim)
                if url == citus_url:
                    await distribute(owner, "gql_memory_app")
                await owner.dispose()

        asyncio.run(prepare())
        tenants = {url: asyncio.run(seed(url)) for url in (embedded.url, citus_url)}
        single = run_configuration(embedded.url, tenants[embedded.url], clients, seconds)
        cluster.coordinator.psql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        for worker in cluster.workers:
            worker.psql("SELECT pg_stat_statements_reset()")
        distributed = run_configuration(citus_url, tenants[citus_url], clients, seconds)
        calls = {worker.name: int(worker.psql(TENANT_CALLS)) for worker in cluster.workers}
        held = placement(cluster)
    finally:
        if cluster is not None:
            cluster.stop()
        if embedded is not None:
            embedded.stop()
        shutil.rmtree(root, ignore_errors=True)
    lines = [
        SECTION,
        "",
        f"Measured {time.strftime('%Y-%m-%d')} by `python -m bench.citus` on "
        f"{platform.machine()} with {os.cpu_count()} cores (load average {load_before:.1f} when "
        "it started): the coordinator, both workers, the server and the load generator all "
        f"ran on these cores. {TENANTS} tenants, each {INSIGHTS_PER_TENANT} insights (hash "
        f"embeddings) and a graph of {NODES_PER_TENANT} nodes / {EDGES_PER_TENANT} edges; "
        f"{clients} concurrent HTTP clients, each request for a random tenant with its API key, "
        f"one server worker, {seconds:g} s per figure.",
        "",
        "| database | adds/s (p50 / p95 ms) | hybrid searches/s (p50 / p95 ms) "
        "| 2-hop neighbours/s (p50 / p95 ms) |",
        "| --- | --- | --- | --- |",
    ]
    for name, r in (
        ("one embedded PostgreSQL", single),
        ("Citus: coordinator + 2 workers", distributed),
    ):
        cells = [
            f"{r[k]['rate']:.0f} ({r[k]['p50']:.1f} / {r[k]['p95']:.1f})"
            for k in ("adds", "searches", "neighbors")
        ]
        lines.append(f"| {name} | {' | '.join(cells)} |")
    ratios = [
        f"{kind} {distributed[kind]['rate'] / single[kind]['rate']:.2f}x"
        for kind in ("adds", "searches", "neighbors")
    ]
    lines += [
        "",
        f"Cluster throughput against the single server: {', '.join(ratios)}.",
        "",
        "Statement calls on shards of tenant tables during the cluster's run, per worker: "
        + ", ".join(
            f"{worker} {count:,} ({len(held[worker])} tenants: {', '.join(held[worker])})"
            for worker, count in calls.items()
        )
        + ".",
    ]
    return lines


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--clients", type=int, default=16)
    args = parser.parse_args()
    section = main(args.seconds, args.clients)
    write_section(RESULTS, section)
    print("\n".join(section))
