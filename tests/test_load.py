"""A bounded load test: `serve --workers 2`, API keys required, many clients, mixed workload.

Zero errors, and the working-memory invariants hold across both worker processes: for every
session, working + stale == adds and working == min(adds, capacity). The longer version is
bench/load.py (results in docs/benchmarks-security.md).
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text

from gql_memory.db import Database
from tests.processes import GQL_MEMORY, ServeProcess, embedded_url, stop_embedded_leftovers

CLIENTS = 32
DURATION_S = 3.0
SESSIONS = 8
CAPACITY = 10


class MixedLoad:
    """Each client loops over a weighted mix of reads and writes until the time is up."""

    def __init__(self, base_url: str, key: str, stable_ids: list[str]) -> None:
        self.base_url = base_url
        self.headers = {"Authorization": f"Bearer {key}"}
        self.stable_ids = stable_ids
        self.adds: Counter[str] = Counter()
        self.requests = 0
        self.errors: list[Any] = []

    async def call(self, client: httpx.AsyncClient, query: str, **variables: Any) -> None:
        self.requests += 1
        try:
            response = await client.post("/graphql", json={"query": query, "variables": variables})
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            self.errors.append(repr(exc))
            return
        if response.status_code != 200 or body.get("errors"):
            self.errors.append(body)

    async def client(self, number: int, until: float) -> None:
        rng = random.Random(number)
        async with httpx.AsyncClient(
            base_url=self.base_url, headers=self.headers, timeout=30
        ) as client:
            sequence = 0
            while time.monotonic() < until:
                sequence += 1
                session = f"hot-{rng.randrange(SESSIONS)}"
                roll = rng.random()
                if roll < 0.35:
                    await self.call(
                        client,
                        "mutation($c: String!, $s: String!) { addWorkingMemory(input: "
                        "{content: $c, sessionId: $s, importance: 0.5}) { addedId } }",
                        c=f"c{number}-{sequence}",
                        s=session,
                    )
                    self.adds[session] += 1
                elif roll < 0.50:
                    await self.call(
                        client,
                        "mutation($s: String!, $c: String!) { storeRawDialogue(input: "
                        '{sessionId: $s, speaker: "user", content: $c}) { id } }',
                        s=session,
                        c=f"turn {number}-{sequence}",
                    )
                elif roll < 0.60:
                    await self.call(
                        client,
                        "mutation($id: ID!) { accessWorkingMemory(id: $id) { id } }",
                        id=rng.choice(self.stable_ids),
                    )
                elif roll < 0.80:
                    await self.call(
                        client,
                        "query($s: String!) { workingMemory(sessionId: $s) { id content } }",
                        s=session,
                    )
                elif roll < 0.90:
                    await self.call(
                        client,
                        "query($s: String!) { rawDialogue(sessionId: $s, first: 20) "
                        "{ edges { node { id content } } } }",
                        s=session,
                    )
                else:
                    await self.call(
                        client,
                        "{ staleMemory(first: 20) { edges { node { id } } } "
                        "stats { workingMemory staleMemory } }",
                    )

    async def run(self, clients: int, seconds: float) -> float:
        started = time.monotonic()
        await asyncio.gather(*(self.client(i, started + seconds) for i in range(clients)))
        return time.monotonic() - started


def create_key(data_dir: Path) -> str:
    done = subprocess.run(
        [str(GQL_MEMORY), "keys", "create", "--namespace", "load", "--scopes", "read,write",
         "--data-dir", str(data_dir)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return done.stdout.strip().splitlines()[-1]


async def test_two_workers_many_clients_zero_errors_invariants_hold(scratch_dir: Path) -> None:
    data_dir = scratch_dir / "data"
    serve = ServeProcess(data_dir, workers=2, env={"GQL_MEMORY_AUTH": "required"}).start()
    try:
        key = await asyncio.to_thread(create_key, data_dir)  # while the server runs
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(base_url=serve.base_url, headers=headers) as client:
            stable = []
            for i in range(5):
                response = await client.post(
                    "/graphql",
                    json={
                        "query": "mutation($c: String!) { addWorkingMemory(input: {content: $c, "
                        'sessionId: "stable"}) { addedId } }',
                        "variables": {"c": f"stable {i}"},
                    },
                )
                stable.append(response.json()["data"]["addWorkingMemory"]["addedId"])
        load = MixedLoad(serve.base_url, key, stable)
        seconds = await load.run(CLIENTS, DURATION_S)
        print(
            f"\n{load.requests} requests in {seconds:.1f}s = {load.requests / seconds:.0f}/s, "
            f"{CLIENTS} clients, 2 workers, {len(load.errors)} errors"
        )
        assert load.errors == [], load.errors[:5]
        assert load.requests > CLIENTS  # (the rate depends on the machine; see bench/load.py)

        db = Database.from_url(embedded_url(data_dir))
        try:
            async with db.read() as conn:
                counts = {
                    (row.table, row.session_id): row.n
                    for row in await conn.execute(
                        text(
                            "SELECT 'working' AS table, session_id, count(*) n FROM working_memory "
                            "WHERE namespace = 'load' GROUP BY session_id UNION ALL "
                            "SELECT 'stale', session_id, count(*) FROM stale_memory "
                            "WHERE namespace = 'load' GROUP BY session_id"
                        )
                    )
                }
        finally:
            await db.dispose()
        for session, adds in load.adds.items():
            working = counts.get(("working", session), 0)
            stale = counts.get(("stale", session), 0)
            assert working + stale == adds, session
            assert working == min(adds, CAPACITY), session
        assert counts[("working", "stable")] == 5 and ("stale", "stable") not in counts
        log = serve.log()
        assert key not in log
        access = [line for line in log.splitlines() if '"gql_memory.access"' in line]
        assert len(access) >= load.requests and all(json.loads(a)["request_id"] for a in access)
    finally:
        serve.stop()
        stop_embedded_leftovers(data_dir)
