"""The mixed workload of tests/test_load.py and of the load benchmark (bench/load.py).

Clients with API keys on a real server: 35% working-memory adds on 16 hot sessions (every add
evicts and archives once a session is full), 15% raw dialogue stores, 10% LRU touches, 40%
reads (working memory, a raw dialogue page, a stale memory page with stats). The test runs a
fixed number of requests per client and checks counts; the benchmark runs for a duration and
reports the rate and the latencies recorded here.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

SESSIONS = 16
ADD = (
    "mutation($c: String!, $s: String!) { addWorkingMemory(input: {content: $c, sessionId: $s}) "
    "{ addedId } }"
)
STORE = (
    "mutation($s: String!, $c: String!) { storeRawDialogue(input: {sessionId: $s, "
    'speaker: "user", content: $c}) { id } }'
)


@dataclass
class Load:
    """Clients on the mixed workload; records latencies, errors and acknowledged writes."""

    url: str
    key: str
    stable_ids: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    errors: list[Any] = field(default_factory=list)
    adds: Counter[str] = field(default_factory=Counter)
    acked_turns: set[str] = field(default_factory=set)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    tolerate_errors: bool = False

    @property
    def requests(self) -> int:
        """Requests answered or failed so far."""
        return len(self.latencies) + len(self.errors)

    async def call(self, client: httpx.AsyncClient, query: str, **variables: Any) -> bool:
        started = time.perf_counter()
        try:
            response = await client.post("/graphql", json={"query": query, "variables": variables})
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            self.errors.append(repr(exc))
            if self.tolerate_errors:
                await asyncio.sleep(0.02)
            return False
        self.latencies.append(time.perf_counter() - started)
        ok = response.status_code == 200 and not body.get("errors")
        if not ok:
            self.errors.append(body)
        return ok

    async def client(self, number: int, until: float, requests: float = math.inf) -> None:
        """One client: a request at a time until ``until`` (monotonic clock), ``requests``
        requests or ``stop``, whichever comes first."""
        rng = random.Random(number)
        headers = {"Authorization": f"Bearer {self.key}"}
        async with httpx.AsyncClient(base_url=self.url, headers=headers, timeout=30) as client:
            sequence = 0
            while sequence < requests and time.monotonic() < until and not self.stop.is_set():
                sequence += 1
                session, content, roll = (
                    f"hot-{rng.randrange(SESSIONS)}",
                    f"c{number}-{sequence}",
                    rng.random(),
                )
                if roll < 0.35:
                    if await self.call(client, ADD, c=content, s=session):
                        self.adds[session] += 1
                elif roll < 0.50:
                    if await self.call(client, STORE, s=session, c=content):
                        self.acked_turns.add(content)
                elif roll < 0.60 and self.stable_ids:
                    await self.call(
                        client,
                        "mutation($id: ID!) { accessWorkingMemory(id: $id) { id } }",
                        id=rng.choice(self.stable_ids),
                    )
                elif roll < 0.80:
                    await self.call(
                        client,
                        "query($s: String!) { workingMemory(sessionId: $s) { id } }",
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
                        "{ staleMemory(first: 20) { edges { node { id } } } stats { sessions } }",
                    )

    async def run(self, clients: int, seconds: float) -> float:
        """All clients for ``seconds``; returns the seconds they took."""
        started = time.monotonic()
        await asyncio.gather(*(self.client(i, started + seconds) for i in range(clients)))
        return time.monotonic() - started

    async def run_requests(self, clients: int, requests: int) -> None:
        """All clients, each until it has sent ``requests`` requests."""
        await asyncio.gather(*(self.client(i, math.inf, requests) for i in range(clients)))


async def seed_stable(url: str, key: str) -> list[str]:
    """Five items in session "stable" (the LRU touches' targets); returns their ids."""
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=url, headers=headers) as client:
        ids = []
        for i in range(5):
            body = (
                await client.post(
                    "/graphql", json={"query": ADD, "variables": {"c": f"s{i}", "s": "stable"}}
                )
            ).json()
            ids.append(body["data"]["addWorkingMemory"]["addedId"])
        return ids
