"""Reading time in the query beside hostile queries (issue 43, item 1).

    python -m bench.time_reading              # writes its section of docs/benchmarks-security.md
    python -m bench.time_reading --no-write --slots 0 1 2

1. What each input costs to read: the CPU time (this process) of dateparser over the whole
   first 300 characters, as the reader did before issue 43, and of the reader now (only the
   spans around its cues; refused before any parsing above TIME_READ_MAX_NUMBERS numbers).
2. Real `gql-memory serve`s (API keys required, hash embedder, each its own embedded
   PostgreSQL), one per GQL_MEMORY_ADMISSION_SLOTS compared (0: fair admission off), all up
   at once, and two tenants. The victim searches its raw turns with `interpretTime` one at
   a time; its p50 alone, and beside clients of the other tenant searching in a loop (in
   another process) with the issue's hostile inputs, and with the costliest input found
   within the bounds (it reaches the CPU ceiling), each with interpretTime and without it
   (the same searches but for the reading). The rows run in short phases, rotated over the
   servers and the rows, so that the machine's load hits all alike. Ratio: p50 against the
   victim's p50 alone on the same server.
3. What fair admission costs a tenant alone: its 12 clients' searches per second on each
   server, measured between the phases above.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench.common import DOCS, percentile, write_section
from bench.load import Serve, embedded_url, stop_leftover_database
from gql_memory.config import TIME_READ_MAX_CHARS, TIME_READ_MAX_NUMBERS, Settings
from gql_memory.db import Database
from gql_memory.keys import ApiKeyStore
from gql_memory.memory.search import period

SECTION = "## Reading time in the query beside hostile queries"
ATTACKERS = 12
QUERIES = 160  # of the victim, over all phases of one mode
PHASES = 4
THROUGHPUT_S = 20.0  # one tenant's 12 clients alone, per server, over all phases
REFERENCE = "2023-05-20T12:00:00Z"
TURNS = [  # (day of 2023, what was said)
    ("2023-05-13T10:00:00Z", "We went on the camping trip to the lake and cooked fish"),
    ("2023-05-06T18:00:00Z", "I cooked a risotto with mushrooms for the family"),
    ("2023-05-07T09:00:00Z", "The support group met on Sunday morning"),
    ("2023-04-15T12:00:00Z", "We travelled to Lisbon in April and saw the castle"),
    ("2023-05-15T20:00:00Z", "The camping gear went back into the garage"),
    ("2023-03-02T08:00:00Z", "I started running before work"),
] * 5
QUESTIONS = [
    "What did we do on the camping trip last week?",
    "What did I cook two weeks ago?",
    "What happened on 7 May 2023?",
    "Where did we travel in April 2023?",
]


def hostile_inputs() -> dict[str, str]:
    """The issue's inputs, cut where the reader cuts them, and the costliest found within the
    bounds (8 numbers in distinct spans of cue words)."""
    words = "since on week month may in last july before month after in week before".split()
    within = " ".join(f"{n} {' '.join(words[n : n + 6])}" for n in range(8))
    return {
        '"0 0 0 …"': period._head(" ".join(["0"] * 150)),
        '"1 2 … 100"': period._head(" ".join(str(n) for n in range(1, 101))),
        'sixty years "1990 1991 …"': period._head(" ".join(str(y) for y in range(1990, 2050))),
        "within the bounds (8 numbers)": within,
    }


def costs() -> list[str]:
    """CPU time of each input: dateparser over the whole text (before) and the reader now."""
    reference = datetime(2023, 5, 20, 12, tzinfo=UTC)
    period.warm_up()
    inputs = {"an ordinary question": QUESTIONS[0], **hostile_inputs()}
    rows = []
    for name, text in inputs.items():
        started = time.process_time()
        period._search_dates(text, reference)
        before = time.process_time() - started
        numbers = len(period._NUMBER.findall(text))
        if numbers > TIME_READ_MAX_NUMBERS:
            now = f"refused before parsing ({numbers} numbers)"
        else:
            started = time.process_time()
            period.read_period(text, reference)
            spans = len(period.date_spans(text))
            now = f"{(time.process_time() - started) * 1000:.0f} ms ({spans} spans)"
        rows.append(f"| {name} | {len(text)} | {before * 1000:.0f} ms | {now} |")
    return rows


async def create_keys(data_dir: Path) -> dict[str, str]:
    db = Database.from_url(embedded_url(data_dir))
    try:
        store = ApiKeyStore(db)
        return {
            who: (await store.create(who, "read,write", name="time-reading")).secret
            for who in ("victim", "attacker")
        }
    finally:
        await db.dispose()


STORE = "mutation($t: RawDialogueInput!) { storeRawDialogue(input: $t) { id } }"
SEARCH = """query($q: String!, $i: Boolean, $r: DateTime) {
  search(query: $q, layers: [RAW], topK: 5, interpretTime: $i, referenceTime: $r) {
    id interpretedPeriod { expression } periodNotRead } }"""


def attack(
    url: str,
    key: str,
    clients: int,
    queries: list[str],
    interpret_time: bool,
    running: Any,
    stop: Any,
    answers: Any,
) -> None:
    """``clients`` clients searching in a loop until ``stop`` is set (in its own process), each
    with one of ``queries`` in turn; sets ``running`` once each client has had an answer, and
    puts how often each answer came on ``answers``."""
    seen: Counter[str] = Counter()
    answered: set[int] = set()

    async def client(http: httpx.AsyncClient, i: int, query: str) -> None:
        variables = {"q": query, "i": interpret_time, "r": REFERENCE}
        while not stop.is_set():
            response = await http.post("/graphql", json={"query": SEARCH, "variables": variables})
            answered.add(i)
            if len(answered) == clients:
                running.set()
            body = response.json()
            if "errors" in body:
                seen[f"error: {body['errors'][0]['message'][:60]}"] += 1
                continue
            hits = body["data"]["search"] or [{"periodNotRead": None}]
            reason = hits[0]["periodNotRead"]
            seen[reason.split(";")[0].split(", more")[0] if reason else "read (or none named)"] += 1

    async def main() -> None:
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120) as http:
            await asyncio.gather(
                *(client(http, i, queries[i % len(queries)]) for i in range(clients))
            )

    asyncio.run(main())
    answers.put(dict(seen))


async def victim(http: httpx.AsyncClient, count: int, offset: int) -> tuple[list[float], int]:
    """Latencies (ms) of ``count`` interpretTime searches, and how many read their period."""
    latencies, read = [], 0
    for i in range(count):
        question = QUESTIONS[(offset + i) % len(QUESTIONS)]
        variables = {"q": question, "i": True, "r": REFERENCE}
        started = time.perf_counter()
        response = await http.post("/graphql", json={"query": SEARCH, "variables": variables})
        latencies.append((time.perf_counter() - started) * 1000)
        body = response.json()
        assert "errors" not in body, body
        read += body["data"]["search"][0]["interpretedPeriod"] is not None
    return latencies, read


Key = tuple[int, str]  # (admission slots, mode)
Found = dict[Key, tuple[list[float], int]]  # the victim's latencies and periods read


@dataclass
class Server:
    """One `gql-memory serve` of the run, with its GQL_MEMORY_ADMISSION_SLOTS and keys."""

    slots: int
    serve: Serve
    keys: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.serve.url

    def client(self, who: str) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {self.keys[who]}"}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=120)


def modes() -> dict[str, tuple[int, list[str], bool] | None]:
    """Each row's attack: (clients, their queries, interpretTime), None for the victim alone."""
    hostile = list(hostile_inputs().values())
    issue, within = list(hostile[:3]), [hostile[3]]
    return {
        "alone": None,
        f"beside {ATTACKERS} clients, the issue's inputs without interpretTime": (
            ATTACKERS,
            issue,
            False,
        ),
        "beside 4 clients, the issue's hostile inputs": (4, issue, True),
        f"beside {ATTACKERS} clients, the issue's hostile inputs": (ATTACKERS, issue, True),
        f"beside {ATTACKERS} clients, within the bounds, without interpretTime": (
            ATTACKERS,
            within,
            False,
        ),
        f"beside {ATTACKERS} clients, within the bounds (CPU ceiling)": (ATTACKERS, within, True),
    }


async def seed(server: Server) -> None:
    """The victim's turns and a few of the attacker's (hits to carry periodNotRead)."""
    for who, turns in (("victim", TURNS), ("attacker", TURNS[:6])):
        async with server.client(who) as http:
            for stamp, content in turns:
                turn = {"sessionId": "s", "speaker": "user", "content": content, "timestamp": stamp}
                await http.post("/graphql", json={"query": STORE, "variables": {"t": turn}})
    async with server.client("victim") as http:
        await victim(http, 8, 0)  # warm: the time readers start, plans are cached


async def throughput(server: Server, seconds: float) -> tuple[int, list[float]]:
    """One tenant alone, ATTACKERS clients searching in a loop (the victim's time questions,
    with interpretTime): the searches answered in ``seconds`` and their latencies (ms)."""
    latencies: list[float] = []
    async with server.client("attacker") as http:

        async def client(i: int, until: float) -> None:
            while time.perf_counter() < until:
                question = QUESTIONS[(i + len(latencies)) % len(QUESTIONS)]
                variables = {"q": question, "i": True, "r": REFERENCE}
                started = time.perf_counter()
                response = await http.post(
                    "/graphql", json={"query": SEARCH, "variables": variables}
                )
                assert "errors" not in response.json(), response.text
                if time.perf_counter() < until:
                    latencies.append((time.perf_counter() - started) * 1000)

        await asyncio.gather(*(client(i, time.perf_counter() + 1) for i in range(ATTACKERS)))
        latencies.clear()  # a second to warm up, then the window
        until = time.perf_counter() + seconds
        await asyncio.gather(*(client(i, until) for i in range(ATTACKERS)))
    return len(latencies), latencies


async def measure(
    servers: list[Server], queries: int, throughput_s: float
) -> tuple[Found, dict[Key, Counter[str]], dict[int, tuple[int, list[float]]]]:
    rows = modes()
    found: Found = {(server.slots, name): ([], 0) for server in servers for name in rows}
    attacks: dict[Key, Counter[str]] = {key: Counter() for key in found}
    rates: dict[int, tuple[int, list[float]]] = {server.slots: (0, []) for server in servers}
    per_phase = queries // PHASES
    context = multiprocessing.get_context("spawn")
    pairs = [(server, name) for server in servers for name in rows]
    for phase in range(PHASES):
        shift = phase * len(pairs) // PHASES
        for server, name in pairs[shift:] + pairs[:shift]:
            key = (server.slots, name)
            running, stop, answers = context.Event(), context.Event(), context.Queue()
            attacker = None
            if (mode := rows[name]) is not None:
                attacker = context.Process(
                    target=attack,
                    args=(server.url, server.keys["attacker"], *mode, running, stop, answers),
                )
                attacker.start()
                await asyncio.to_thread(running.wait, 120)  # the attack under way
            async with server.client("victim") as http:
                latencies, read = await victim(http, per_phase, phase)
            stop.set()
            if attacker is not None:
                attacks[key].update(answers.get(timeout=60))
                attacker.join(60)
            found[key] = (found[key][0] + latencies, found[key][1] + read)
            print(
                f"phase {phase} slots {server.slots} {name}: "
                f"p50 {percentile(latencies, 50):.1f} ms",
                flush=True,
            )
        for server in servers[phase % len(servers) :] + servers[: phase % len(servers)]:
            answered, latencies = await throughput(server, throughput_s / PHASES)
            done, seen = rates[server.slots]
            rates[server.slots] = (done + answered, seen + latencies)
            print(f"phase {phase} slots {server.slots} throughput: {answered}", flush=True)
    return found, attacks, rates


def admission(slots: int) -> str:
    return f"{slots} slot{'s' if slots > 1 else ''}" if slots else "off"


def report(
    found: Found,
    attacks: dict[Key, Counter[str]],
    rates: dict[int, tuple[int, list[float]]],
    cost_rows: list[str],
    load: float,
    throughput_s: float,
) -> list[str]:
    queries = len(next(iter(found.values()))[0])
    alone = {slots: percentile(found[(slots, "alone")][0], 50) for slots in rates}
    rows = [
        f"| {admission(slots)} | {name} | {percentile(latencies, 50):.1f} | "
        f"{percentile(latencies, 95):.1f} | {percentile(latencies, 50) / alone[slots]:.2f}x | "
        f"{read}/{len(latencies)} |"
        for (slots, name), (latencies, read) in found.items()
    ]
    unbounded = rates.get(0, next(iter(rates.values())))[0]
    rate_rows = [
        f"| {admission(slots)} | {answered / throughput_s:.0f} | {answered / unbounded:.2f}x | "
        f"{percentile(latencies, 50):.1f} | {percentile(latencies, 95):.1f} |"
        for slots, (answered, latencies) in rates.items()
    ]
    default = Settings.model_fields["admission_slots"].default
    return [
        SECTION,
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d} with `python -m bench.time_reading` on "
        f"{platform.machine()} ({platform.system()}), {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; 1-minute load average at the start: {load:.1f} (other "
        "work on the machine shows here).",
        "",
        f"What reading an input costs (CPU time in one process; the first {TIME_READ_MAX_CHARS} "
        "characters): dateparser over all of them, as before issue 43, and the reader now "
        f"(only the spans around its cues; more than {TIME_READ_MAX_NUMBERS} numbers are "
        "refused before any parsing; in the server, a reading is also stopped at "
        "GQL_MEMORY_SEARCH_TIME_READ_CEILING_MS, 50 ms of CPU).",
        "",
        "| input | characters | before | now |",
        "| --- | --- | --- | --- |",
        *cost_rows,
        "",
        "`gql-memory serve` (API keys required, hash embedder, embedded PostgreSQL), two "
        "tenants, one server per `GQL_MEMORY_ADMISSION_SLOTS` (`off`: 0, every request runs at "
        f"once, as before fair admission; the default is {default}), all up at once. The "
        "victim's `search(layers: [RAW], topK: 5, interpretTime: true)` over 30 turns, one at "
        "a time, four time questions in rotation; the other tenant's clients search in a loop "
        "from another process (the issue's three inputs in turn), with interpretTime, and "
        "without it: the same searches but for the reading, the rows to compare with. "
        f"{queries} victim searches per row, in {PHASES} phases per row, rotated over servers "
        "and rows. Ratio: p50 against the victim's p50 alone on the same server.",
        "",
        "| admission | victim | p50 ms | p95 ms | ratio | periods read |",
        "| --- | --- | --- | --- | --- | --- |",
        *rows,
        "",
        f"What one tenant alone gets from the same servers: {ATTACKERS} clients searching in a "
        "loop (the victim's time questions, with interpretTime), over "
        f"{throughput_s:.0f} s per server in {PHASES} phases, between the rows above.",
        "",
        f"| admission | searches/s, {ATTACKERS} clients | against off | p50 ms | p95 ms |",
        "| --- | --- | --- | --- | --- |",
        *rate_rows,
        "",
        "What the other tenant's searches were answered (`periodNotRead`, cut at its first "
        "clause):",
        "",
        "| admission | attack | answers |",
        "| --- | --- | --- |",
        *(
            f"| {admission(slots)} | {name} | "
            f"{', '.join(f'{reason}: {n}' for reason, n in seen.most_common())} |"
            for (slots, name), seen in attacks.items()
            if seen
        ),
        "",
    ]


async def run(
    queries: int, slots: list[int], throughput_s: float
) -> tuple[Found, dict[Key, Counter[str]], dict[int, tuple[int, list[float]]]]:
    root = Path(tempfile.mkdtemp(prefix="gqlm-time-"))
    servers = [
        Server(
            n,
            Serve(
                root / f"slots-{n}" / "data",
                env={"GQL_MEMORY_EMBEDDING_PROVIDER": "hash", "GQL_MEMORY_ADMISSION_SLOTS": str(n)},
            ),
        )
        for n in slots
    ]
    try:
        for server in servers:
            server.serve.data_dir.parent.mkdir(parents=True)
            server.serve.start()
            server.keys = await create_keys(server.serve.data_dir)
            await seed(server)
        return await measure(servers, queries, throughput_s)
    finally:
        for server in servers:
            server.serve.stop()
            stop_leftover_database(server.serve.data_dir)


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-write", action="store_true", help="print, do not write docs/")
    parser.add_argument("--queries", type=int, default=QUERIES, help="victim searches per row")
    default = Settings.model_fields["admission_slots"].default
    compared = sorted({0, 1, 2, default})
    parser.add_argument(
        "--slots",
        type=int,
        nargs="+",
        default=compared,
        help=f"GQL_MEMORY_ADMISSION_SLOTS of each server (default: {compared}; 0: off)",
    )
    parser.add_argument(
        "--throughput-s", type=float, default=THROUGHPUT_S, help="one tenant's window per server"
    )
    arguments = parser.parse_args(argv)
    load = os.getloadavg()[0]
    cost_rows = costs()
    found, attacks, rates = asyncio.run(
        run(arguments.queries, arguments.slots, arguments.throughput_s)
    )
    lines = report(found, attacks, rates, cost_rows, load, arguments.throughput_s)
    if not arguments.no_write:
        write_section(DOCS / "benchmarks-security.md", lines)
    return lines


if __name__ == "__main__":
    print("\n".join(main(sys.argv[1:])))
