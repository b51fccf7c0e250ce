"""Soak benchmark: two normal tenants keep working while a third one attacks the same server.

    python -m bench.soak                        # 30 s baseline + 30 s attack, writes the section
    python -m bench.soak --seconds 60 --clients 8 --no-write

One real `gql-memory serve` on 127.0.0.1 (API keys required, its own embedded PostgreSQL in a
temporary directory, the local e5 embedder unless `--embedder hash`) and three API keys in
three namespaces. Tenants A and B run a few clients each, looping over addWorkingMemory,
storeRawDialogue and search. Phase 1 (baseline) is only them; in phase 2 (attack) tenant C
sends one reproducer every few seconds, in rotation, without waiting for the answers: a 1 MB
item without spaces then a context over it; 30 aliased connections of 1000 nodes each with
1000 edges each (refused by the query cost limit); 30 aliased contexts of 100,000 tokens in
one request (refused by the cost limit) and 9 (the most it admits); a subscription opened
and dropped. Whatever C still has in flight when the
attack ends is dropped; then 10 s more without C. Measured: the normal tenants' latencies per
phase and their errors (must be 0), the attacker's answers, a /healthz probe (event-loop
stalls), the server's RSS and how long it takes to exit on SIGTERM. The section "Soak: ..."
of docs/benchmarks-security.md is replaced; the rest of the file is kept.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import shutil
import string
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
import websockets

from bench.common import DOCS, percentile, write_section
from bench.load import Serve, embedded_url, ms, stop_leftover_database
from gql_memory.db import Database
from gql_memory.keys import ApiKeyStore
from tests.mixed_workload import ADD, STORE

SECTION = "## Soak: two normal tenants and an attacker"
TENANTS = {"A": "soak-a", "B": "soak-b"}
ATTACKER = "soak-c"
PHASES = ("baseline", "attack", "after")
SETTLE_S = 10.0
TARGET_RATIO = 3.0
# Issue 11's done criterion: /healthz answers within a second while any reproducer runs (a
# wall-clock bound, so measured here rather than asserted in tests/api/test_reproducers.py).
HEALTHZ_LIMIT_S = 1.0
REQUEST_TIMEOUT_S = 30.0
ATTACK_TIMEOUT_S = 30.0
ALIASES = 30
BIG_ITEM_CHARS = 1_000_000
GRAPH_NODES, GRAPH_EDGES = 200, 1000
WORDS = (
    "berlin paris meeting deadline budget coffee flight hotel report invoice "
    "dentist garden printer contract museum train"
).split()

SEARCH = (
    "query($q: String!, $s: String!) { search(query: $q, sessionId: $s, layers: [RAW], "
    "topK: 10) { id content } }"
)
BIG_CONTEXT = (
    'query($s: String!) { context(query: "x", sessionId: $s, maxTokens: 8000, '
    "include: [WORKING]) { totalTokens text } }"
)
NESTED = (
    "fragment Fan on Node { edges(first: 1000) { source { id } target { id } } }\nquery { "
    + " ".join(
        f"n{i}: nodes(first: 1000) {{ edges {{ node {{ id ...Fan }} }} }}" for i in range(ALIASES)
    )
    + " }"
)


def contexts(aliases: int) -> str:
    return (
        "query($s: String!) { "
        + " ".join(
            f'c{i}: context(query: "x", sessionId: $s, maxTokens: 100000) {{ totalTokens text }}'
            for i in range(aliases)
        )
        + " }"
    )


CONTEXTS = contexts(ALIASES)
# The most 100,000-token contexts one request may ask for under the default cost limit
# (each costs 1 per 5 tokens of its budget): the heaviest context request that runs.
ADMITTED_CONTEXTS = 9


# --- recording ---------------------------------------------------------------------------------


@dataclass
class Soak:
    """The current phase (requests are filed under the phase they started in) and the records."""

    phase: str = "baseline"
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[tuple[str, str], list[str]] = field(default_factory=lambda: defaultdict(list))
    searches: int = 0
    foreign_hits: list[str] = field(default_factory=list)
    health: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    rss: list[tuple[str, int]] = field(default_factory=list)
    attacks: list[tuple[str, str, float]] = field(default_factory=list)
    by_operation: dict[tuple[str, str], list[float]] = field(
        default_factory=lambda: defaultdict(list)
    )

    def record(self, phase: str, operation: str, seconds: float) -> None:
        self.latencies[phase].append(seconds)
        self.by_operation[(phase, operation)].append(seconds)


def answer(response: httpx.Response) -> str:
    """'ok', the error codes of a GraphQL answer, or the HTTP status."""
    try:
        body = response.json()
    except ValueError:
        return f"HTTP {response.status_code}"
    errors = body.get("errors") if isinstance(body, dict) else None
    if not errors:
        return "ok" if response.status_code == 200 else f"HTTP {response.status_code}"
    codes = sorted({(e.get("extensions") or {}).get("code", "uncoded") for e in errors})
    return "/".join(codes)


def server_rss(pid: int) -> int:
    """RSS of the server process and its children, the embedded PostgreSQL left out."""
    total = 0
    with contextlib.suppress(psutil.Error):
        process = psutil.Process(pid)
        for proc in [process, *process.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                if not proc.name().startswith("postgres"):
                    total += proc.memory_info().rss
    return total


# --- normal tenants ----------------------------------------------------------------------------


async def normal_client(url: str, tenant: str, key: str, number: int, soak: Soak) -> None:
    rng = random.Random(f"{tenant}-{number}")
    namespace = TENANTS[tenant]
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(
        base_url=url, headers=headers, timeout=REQUEST_TIMEOUT_S
    ) as client:
        sequence = 0
        while not soak.stop.is_set():
            sequence += 1
            session, roll = f"s{rng.randrange(4)}", rng.random()
            content = f"{namespace} {number}-{sequence} " + " ".join(rng.choices(WORDS, k=6))
            if roll < 0.4:
                op, query, variables = "addWorkingMemory", ADD, {"c": content, "s": session}
            elif roll < 0.7:
                op, query, variables = "storeRawDialogue", STORE, {"s": session, "c": content}
            else:
                words = " ".join(rng.choices(WORDS, k=2))
                op, query, variables = "search", SEARCH, {"q": words, "s": session}
            phase, started = soak.phase, time.perf_counter()
            try:
                response = await client.post(
                    "/graphql", json={"query": query, "variables": variables}
                )
                body = response.json()
            except (httpx.HTTPError, ValueError) as exc:
                soak.record(phase, op, time.perf_counter() - started)
                soak.errors[(phase, tenant)].append(f"{type(exc).__name__}: {exc}"[:300])
                await asyncio.sleep(0.05)
                continue
            soak.record(phase, op, time.perf_counter() - started)
            if response.status_code != 200 or body.get("errors"):
                soak.errors[(phase, tenant)].append(json.dumps(body)[:300])
            elif query is SEARCH:
                soak.searches += 1
                soak.foreign_hits += [
                    hit["content"][:100]
                    for hit in body["data"]["search"]
                    if namespace not in hit["content"]
                ]


async def warm_up(url: str, keys: dict[str, str]) -> None:
    """Some rows per tenant and a first search, so that the embedder is loaded before timing."""
    for tenant, key in keys.items():
        async with httpx.AsyncClient(
            base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120
        ) as client:
            for i in range(20):
                content = f"{TENANTS[tenant]} warm-{i} " + " ".join(WORDS[i % 8 : i % 8 + 5])
                for query in (ADD, STORE):
                    body = (
                        await client.post(
                            "/graphql",
                            json={"query": query, "variables": {"c": content, "s": "s0"}},
                        )
                    ).json()
                    assert not body.get("errors"), body
            body = (
                await client.post(
                    "/graphql", json={"query": SEARCH, "variables": {"q": "hotel", "s": "s0"}}
                )
            ).json()
            assert not body.get("errors"), body


# --- attacker ----------------------------------------------------------------------------------


async def seed_graph(client: httpx.AsyncClient) -> None:
    """The attacker's small graph: GRAPH_NODES nodes, GRAPH_EDGES distinct edges."""
    ids: list[str] = []
    for start in range(0, GRAPH_NODES, ALIASES):
        fields = " ".join(
            f'n{i}: addNode(input: {{label: "soak", name: "n{i}"}}) {{ id }}'
            for i in range(start, min(start + ALIASES, GRAPH_NODES))
        )
        body = (await client.post("/graphql", json={"query": f"mutation {{ {fields} }}"})).json()
        assert not body.get("errors"), body
        ids += [node["id"] for node in body["data"].values()]
    rng = random.Random(7)
    pairs = rng.sample([(s, t) for s in ids for t in ids if s != t], GRAPH_EDGES)
    for start in range(0, GRAPH_EDGES, ALIASES):
        fields = " ".join(
            f'e{i}: addEdge(input: {{sourceId: "{s}", targetId: "{t}", relation: "links"}}) '
            "{ id }"
            for i, (s, t) in enumerate(pairs[start : start + ALIASES])
        )
        body = (await client.post("/graphql", json={"query": f"mutation {{ {fields} }}"})).json()
        assert not body.get("errors"), body


class Attacker:
    """Tenant C: one reproducer every `every` seconds, in rotation, until the attack ends."""

    def __init__(self, url: str, key: str, soak: Soak) -> None:
        self.url, self.key, self.soak = url, key, soak
        rng = random.Random(1)
        self.big = "".join(rng.choices(string.ascii_letters + string.digits, k=BIG_ITEM_CHARS))
        self.reproducers: list[Callable[[httpx.AsyncClient], Awaitable[None]]] = [
            self.big_item,
            self.nested_connections,
            self.aliased_contexts,
            self.subscription,
            self.admitted_contexts,
        ]

    async def send(
        self, client: httpx.AsyncClient, kind: str, query: str, **variables: Any
    ) -> bool:
        started = time.perf_counter()
        try:
            response = await client.post("/graphql", json={"query": query, "variables": variables})
            result = answer(response)
        except httpx.HTTPError as exc:
            result = type(exc).__name__
        except asyncio.CancelledError:
            self.record(kind, "no answer when the attack ended", started)
            raise
        self.record(kind, result, started)
        return result == "ok"

    def record(self, kind: str, result: str, started: float) -> None:
        self.soak.attacks.append((kind, result, time.perf_counter() - started))

    async def big_item(self, client: httpx.AsyncClient) -> None:
        kind = "1 MB item without spaces (addWorkingMemory)"
        if await self.send(client, kind, ADD, c=self.big, s="big"):
            await self.send(
                client, "context over it (maxTokens 8000, WORKING)", BIG_CONTEXT, s="big"
            )

    async def nested_connections(self, client: httpx.AsyncClient) -> None:
        kind = f"{ALIASES} aliased nodes(first: 1000) × edges(first: 1000)"
        await self.send(client, kind, NESTED)

    async def aliased_contexts(self, client: httpx.AsyncClient) -> None:
        kind = f"{ALIASES} aliased context(maxTokens: 100000) in one request"
        await self.send(client, kind, CONTEXTS, s="big")

    async def admitted_contexts(self, client: httpx.AsyncClient) -> None:
        kind = f"{ADMITTED_CONTEXTS} aliased context(maxTokens: 100000), just under the cost limit"
        await self.send(client, kind, contexts(ADMITTED_CONTEXTS), s="big")

    async def subscription(self, client: httpx.AsyncClient) -> None:
        """graphql-transport-ws: init, subscribe, hold 1 s, drop the socket without complete."""
        kind, started = "subscription opened, held 1 s, dropped", time.perf_counter()
        ws_url = self.url.replace("http://", "ws://") + "/graphql"
        auth = {"Authorization": f"Bearer {self.key}"}
        try:
            async with websockets.connect(
                ws_url, subprotocols=["graphql-transport-ws"], open_timeout=ATTACK_TIMEOUT_S
            ) as ws:
                await ws.send(json.dumps({"type": "connection_init", "payload": auth}))
                ack = json.loads(await asyncio.wait_for(ws.recv(), ATTACK_TIMEOUT_S))
                result = "ok" if ack.get("type") == "connection_ack" else str(ack.get("type"))
                subscribe = {"query": "subscription { memoryEvents { kind ids } }"}
                await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": subscribe}))
                with contextlib.suppress(TimeoutError):
                    message = json.loads(await asyncio.wait_for(ws.recv(), 1))
                    if message.get("type") == "error":
                        result = "error: " + json.dumps(message.get("payload"))[:80]
        except (OSError, TimeoutError, websockets.WebSocketException) as exc:
            result = type(exc).__name__
        except asyncio.CancelledError:
            self.record(kind, "no answer when the attack ended", started)
            raise
        self.record(kind, result, started)

    async def run(self, seconds: float, every: float) -> None:
        """Fire a reproducer every `every` s without waiting for the previous one's answer;
        whatever is still in flight when the attack ends is dropped (the client disconnects)."""
        headers = {"Authorization": f"Bearer {self.key}"}
        end = time.monotonic() + seconds
        in_flight: set[asyncio.Task[None]] = set()
        async with httpx.AsyncClient(
            base_url=self.url, headers=headers, timeout=ATTACK_TIMEOUT_S
        ) as client:
            turn = 0
            while time.monotonic() < end:
                task = asyncio.create_task(self.reproducers[turn % len(self.reproducers)](client))
                in_flight.add(task)
                task.add_done_callback(in_flight.discard)
                turn += 1
                await asyncio.sleep(max(0.0, min(every, end - time.monotonic())))
            for task in list(in_flight):
                task.cancel()
            await asyncio.gather(*in_flight, return_exceptions=True)


# --- probes ------------------------------------------------------------------------------------


async def sample_rss(pid: int, soak: Soak) -> None:
    while not soak.stop.is_set():
        soak.rss.append((soak.phase, server_rss(pid)))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(soak.stop.wait(), 1)


async def probe_health(url: str, soak: Soak) -> None:
    """/healthz touches no database: its latency is the event loop's responsiveness."""
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        while not soak.stop.is_set():
            phase, started = soak.phase, time.perf_counter()
            with contextlib.suppress(httpx.HTTPError):
                await client.get("/healthz")
            soak.health[phase].append(time.perf_counter() - started)
            await asyncio.sleep(0.25)


# --- the run -----------------------------------------------------------------------------------


async def create_keys(data_dir: Path) -> dict[str, str]:
    db = Database.from_url(embedded_url(data_dir))
    try:
        store = ApiKeyStore(db)
        namespaces = {**TENANTS, "C": ATTACKER}
        return {
            tenant: (await store.create(namespace, "read,write", name="soak")).secret
            for tenant, namespace in namespaces.items()
        }
    finally:
        await db.dispose()


@dataclass
class Result:
    soak: Soak
    seconds: float
    clients: int
    every: float
    durations: dict[str, float]
    rss: dict[str, int]
    log_errors: list[str]
    stop_s: float | None
    load_average: float
    embedder: str


async def run(seconds: float, clients: int, every: float, embedder: str) -> Result:
    root = Path(tempfile.mkdtemp(prefix="gqlm-soak-"))
    data_dir = root / "data"
    serve = Serve(data_dir, env={"GQL_MEMORY_EMBEDDING_PROVIDER": embedder})
    try:
        print("starting the server", flush=True)
        serve.start()
        assert serve.process is not None
        pid = serve.process.pid
        keys = await create_keys(data_dir)
        print("seeding: tenants' rows, the attacker's graph", flush=True)
        await warm_up(serve.url, {t: keys[t] for t in TENANTS})
        async with httpx.AsyncClient(
            base_url=serve.url, headers={"Authorization": f"Bearer {keys['C']}"}, timeout=120
        ) as client:
            await seed_graph(client)
        soak, load_average = Soak(), os.getloadavg()[0]
        rss = {"start": server_rss(pid)}
        durations: dict[str, float] = {}
        background = [
            asyncio.create_task(normal_client(serve.url, tenant, keys[tenant], i, soak))
            for tenant in TENANTS
            for i in range(clients)
        ]
        background += [
            asyncio.create_task(sample_rss(pid, soak)),
            asyncio.create_task(probe_health(serve.url, soak)),
        ]
        print(f"baseline: {seconds:.0f} s, {clients} clients per tenant", flush=True)
        started = time.monotonic()
        await asyncio.sleep(seconds)
        durations["baseline"] = time.monotonic() - started
        rss["end of baseline"] = server_rss(pid)
        print(f"attack: {seconds:.0f} s, a reproducer every {every:.0f} s", flush=True)
        soak.phase, started = "attack", time.monotonic()
        await Attacker(serve.url, keys["C"], soak).run(seconds, every)
        durations["attack"] = time.monotonic() - started
        rss["end of attack"] = server_rss(pid)
        print(f"after: {SETTLE_S:.0f} s without the attacker", flush=True)
        soak.phase, started = "after", time.monotonic()
        await asyncio.sleep(SETTLE_S)
        durations["after"] = time.monotonic() - started
        rss[f"{SETTLE_S:.0f} s after the attack"] = server_rss(pid)
        soak.stop.set()
        await asyncio.gather(*background)
        rss["max during attack"] = max(
            (value for phase, value in soak.rss if phase == "attack"), default=0
        )
    except BaseException:
        log = root / f"serve-{serve.port}.log"
        if log.exists():  # the server's own account of what went wrong, before it is deleted
            print("server log (tail):", *log.read_text().splitlines()[-20:], sep="\n")
        raise
    finally:
        stopped = stop(serve)
        stop_leftover_database(data_dir)
        log_errors = error_lines(root / f"serve-{serve.port}.log")
        shutil.rmtree(root, ignore_errors=True)
    return Result(
        soak, seconds, clients, every, durations, rss, log_errors, stopped, load_average, embedder
    )


def stop(serve: Serve) -> float | None:
    """SIGTERM; the seconds until the process exited, or None if it had to be killed after 60 s."""
    started = time.perf_counter()
    try:
        serve.stop()
    except subprocess.TimeoutExpired:
        assert serve.process is not None
        serve.process.kill()
        serve.process.wait()
        return None
    return time.perf_counter() - started


def error_lines(log: Path) -> list[str]:
    """Lines of the server's log at ERROR or above (JSON lines, or text)."""
    found = []
    for line in log.read_text(errors="replace").splitlines() if log.exists() else []:
        try:
            record = json.loads(line)
            level = str(record.get("level", record.get("levelname", ""))).upper()
        except (ValueError, AttributeError):
            level = "ERROR" if " ERROR " in line or "Traceback" in line else ""
        if level in ("ERROR", "CRITICAL"):
            found.append(line[:300])
    return found


# --- report ------------------------------------------------------------------------------------


def p(values: list[float], q: float) -> float:
    return percentile(values, q) if values else 0.0


def report(result: Result) -> tuple[list[str], bool]:
    soak = result.soak
    p99 = {phase: p(soak.latencies[phase], 99) for phase in PHASES}
    ratio = p99["attack"] / p99["baseline"] if p99["baseline"] else float("inf")
    normal_errors = sum(len(v) for v in soak.errors.values())
    healthz_max = max(soak.health["attack"], default=0)
    ok = (
        ratio < TARGET_RATIO
        and normal_errors == 0
        and not soak.foreign_hits
        and healthz_max < HEALTHZ_LIMIT_S
    )
    lines = [
        SECTION,
        "",
        f"Measured {time.strftime('%Y-%m-%d')} with `python -m bench.soak` on "
        f"{platform.machine()} ({platform.system()}), {os.cpu_count()} cores, Python "
        f"{platform.python_version()}: one `gql-memory serve` (1 worker, API keys required, "
        f"{result.embedder} embedder, embedded PostgreSQL) on 127.0.0.1, clients in one process on "
        f"the same machine. Tenants A and B ({result.clients} clients each) loop over "
        "addWorkingMemory (40%), storeRawDialogue (30%) and search over their raw dialogue "
        f"(30%). Baseline {result.durations['baseline']:.0f} s with only them; attack "
        f"{result.durations['attack']:.0f} s in which tenant C sends a reproducer every "
        f"{result.every:.0f} s, in rotation; then {result.durations['after']:.0f} s without C. "
        "A request counts in the phase it started in; its latency includes client queueing. "
        f"1-minute load average when the baseline started: {result.load_average:.1f} "
        "(other work on the machine shows here).",
        "",
        "| phase | duration | requests (A+B) | requests/s | latency p50 / p95 / p99 "
        "| errors A / B | /healthz max |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for phase in PHASES:
        lat, seconds = soak.latencies[phase], result.durations[phase]
        lines.append(
            f"| {phase} | {seconds:.0f} s | {len(lat)} | {len(lat) / seconds:.0f} | "
            f"{ms(p(lat, 50))} / {ms(p(lat, 95))} / {ms(p(lat, 99))} | "
            f"{len(soak.errors[(phase, 'A')])} / {len(soak.errors[(phase, 'B')])} | "
            f"{ms(max(soak.health[phase], default=0))} |"
        )
    lines += [
        "",
        "Per operation, p50 / p99:",
        "",
        "| operation | " + " | ".join(PHASES) + " |",
        "| --- |" + " --- |" * len(PHASES),
    ]
    for operation in ("addWorkingMemory", "storeRawDialogue", "search"):
        cells = [soak.by_operation[(phase, operation)] for phase in PHASES]
        lines.append(
            f"| {operation} | "
            + " | ".join(f"{ms(p(lat, 50))} / {ms(p(lat, 99))}" for lat in cells)
            + " |"
        )
    lines += [
        "",
        f"**p99 attack / baseline: {ratio:.2f}×** (target < {TARGET_RATIO:.0f}×: "
        f"{'met' if ratio < TARGET_RATIO else 'MISSED'}). /healthz max under attack: "
        f"{ms(healthz_max)} (target < {ms(HEALTHZ_LIMIT_S)}: "
        f"{'met' if healthz_max < HEALTHZ_LIMIT_S else 'MISSED'}). Normal tenants' errors: "
        f"**{normal_errors}**. Searches by A and B: {soak.searches}, hits from another "
        f"namespace: **{len(soak.foreign_hits)}**. Server log lines at ERROR: "
        f"{len(result.log_errors)}. SIGTERM → server exited: "
        + (
            f"{ms(result.stop_s)}."
            if result.stop_s is not None
            else "**not within 60 s** (killed)."
        ),
        "",
        "The attacker's requests (its errors are answers, not failures):",
        "",
        "| request | sent | answers | latency median / max |",
        "| --- | --- | --- | --- |",
    ]
    by_kind: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for kind, code, seconds in soak.attacks:
        by_kind[kind].append((code, seconds))
    for kind, answers in by_kind.items():
        codes = Counter(code for code, _ in answers)
        latencies = [seconds for _, seconds in answers]
        lines.append(
            f"| {kind} | {len(answers)} | "
            + ", ".join(f"{code} {n}" for code, n in codes.most_common())
            + f" | {ms(p(latencies, 50))} / {ms(max(latencies))} |"
        )
    lines += [
        "",
        "Server RSS (the server process and its children, embedded PostgreSQL excluded; "
        "sampled every second):",
        "",
        "| moment | RSS |",
        "| --- | --- |",
    ]
    order = ["start", "end of baseline", "max during attack", "end of attack"]
    for moment in order + [m for m in result.rss if m not in order]:
        lines.append(f"| {moment} | {result.rss[moment] / 2**20:.0f} MiB |")
    lines += [
        "",
        f"Replay: `python -m bench.soak --seconds {result.seconds:g} --clients {result.clients} "
        f"--attack-every {result.every:g} --embedder {result.embedder}`.",
    ]
    problems = [f"{phase} {tenant}: {e}" for (phase, tenant), v in soak.errors.items() for e in v]
    problems += [f"foreign hit: {hit}" for hit in soak.foreign_hits] + result.log_errors
    if problems:
        lines += ["", "First problems:", ""] + [f"    {x[:300]}" for x in problems[:20]]
    return lines, ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__)
    parser.add_argument("--seconds", type=float, default=30, help="per phase (baseline, attack)")
    parser.add_argument("--clients", type=int, default=4, help="per normal tenant")
    parser.add_argument("--attack-every", type=float, default=3, help="seconds per reproducer")
    parser.add_argument(
        "--embedder",
        choices=["local", "hash"],
        default="local",
        help="the server's embedder: local (the default e5 model, on the CPU) or hash (lexical)",
    )
    parser.add_argument("--no-write", action="store_true", help="only print the section")
    args = parser.parse_args(argv)
    result = asyncio.run(run(args.seconds, args.clients, args.attack_every, args.embedder))
    lines, ok = report(result)
    if not args.no_write:
        write_section(DOCS / "benchmarks-security.md", lines)
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
