"""Reading time in the query beside hostile queries (issue 43, item 1).

    python -m bench.time_reading              # writes its section of docs/benchmarks-security.md
    python -m bench.time_reading --no-write

1. What each input costs to read: the CPU time (this process) of dateparser over the whole
   first 300 characters, as the reader did before issue 43, and of the reader now (only the
   spans around its cues; refused before any parsing above TIME_READ_MAX_NUMBERS numbers).
2. One real `gql-memory serve` (API keys required, hash embedder, its own embedded
   PostgreSQL) and two tenants. The victim searches its raw turns with `interpretTime` one at
   a time; its p50 alone, and beside clients of the other tenant searching in a loop (in
   another process) with the issue's hostile inputs, and with the costliest input found
   within the bounds (it reaches the CPU ceiling), each with interpretTime and without it
   (the same searches but for the reading). The modes run in short phases, in rotation, so
   that the machine's load hits all alike. Ratio: p50 against the victim's p50 alone.
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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench.common import DOCS, percentile, write_section
from bench.load import Serve, embedded_url, stop_leftover_database
from gql_memory.config import TIME_READ_MAX_CHARS, TIME_READ_MAX_NUMBERS
from gql_memory.db import Database
from gql_memory.keys import ApiKeyStore
from gql_memory.memory.search import period

SECTION = "## Reading time in the query beside hostile queries"
ATTACKERS = 12
QUERIES = 160  # of the victim, over all phases of one mode
PHASES = 4
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


Found = dict[str, tuple[list[float], int]]  # per mode: the victim's latencies, periods read


async def measure(
    url: str, keys: dict[str, str], queries: int
) -> tuple[Found, dict[str, Counter[str]]]:
    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {keys['victim']}"}, timeout=120
    ) as http:
        for stamp, content in TURNS:
            turn = {"sessionId": "s", "speaker": "user", "content": content, "timestamp": stamp}
            await http.post("/graphql", json={"query": STORE, "variables": {"t": turn}})
        await victim(http, 8, 0)  # warm: the time readers start, plans are cached
    attacker_headers = {"Authorization": f"Bearer {keys['attacker']}"}
    async with httpx.AsyncClient(base_url=url, headers=attacker_headers, timeout=120) as http:
        for stamp, content in TURNS[:6]:  # hits to carry periodNotRead
            turn = {"sessionId": "s", "speaker": "user", "content": content, "timestamp": stamp}
            await http.post("/graphql", json={"query": STORE, "variables": {"t": turn}})
    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {keys['victim']}"}, timeout=120
    ) as http:
        hostile = list(hostile_inputs().values())
        issue, within = list(hostile[:3]), [hostile[3]]
        modes: dict[str, tuple[int, list[str], bool] | None] = {
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
            f"beside {ATTACKERS} clients, within the bounds (CPU ceiling)": (
                ATTACKERS,
                within,
                True,
            ),
        }
        found: dict[str, tuple[list[float], int]] = {name: ([], 0) for name in modes}
        attacks: dict[str, Counter[str]] = {name: Counter() for name in modes}
        per_phase = queries // PHASES
        context = multiprocessing.get_context("spawn")
        for phase in range(PHASES):
            names = list(modes)[phase % len(modes) :] + list(modes)[: phase % len(modes)]
            for name in names:
                running, stop, answers = context.Event(), context.Event(), context.Queue()
                attacker = None
                if (mode := modes[name]) is not None:
                    attacker = context.Process(
                        target=attack,
                        args=(url, keys["attacker"], *mode, running, stop, answers),
                    )
                    attacker.start()
                    await asyncio.to_thread(running.wait, 120)  # the attack under way
                latencies, read = await victim(http, per_phase, phase)
                stop.set()
                if attacker is not None:
                    attacks[name].update(answers.get(timeout=60))
                    attacker.join(60)
                found[name] = (found[name][0] + latencies, found[name][1] + read)
                print(f"phase {phase} {name}: p50 {percentile(latencies, 50):.1f} ms", flush=True)
        return found, attacks


def report(
    found: Found, attacks: dict[str, Counter[str]], cost_rows: list[str], load: float
) -> list[str]:
    queries = len(found["alone"][0])
    alone = percentile(found["alone"][0], 50)
    rows = [
        f"| {name} | {percentile(latencies, 50):.1f} | {percentile(latencies, 95):.1f} | "
        f"{percentile(latencies, 50) / alone:.2f}x | {read}/{len(latencies)} |"
        for name, (latencies, read) in found.items()
    ]
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
        "One `gql-memory serve` (API keys required, hash embedder, embedded PostgreSQL), two "
        "tenants. The victim's `search(layers: [RAW], topK: 5, interpretTime: true)` over 30 "
        "turns, one at a time, four time questions in rotation; the other tenant's "
        "clients search in a loop from another process (the issue's three inputs in turn), "
        "with interpretTime, and without it: the same searches but for the reading, the "
        f"rows to compare with. {queries} victim searches per row, in {PHASES} phases per "
        "row, rotated. Ratio: p50 against the victim's p50 alone.",
        "",
        "| victim | p50 ms | p95 ms | ratio | periods read |",
        "| --- | --- | --- | --- | --- |",
        *rows,
        "",
        "What the other tenant's searches were answered (`periodNotRead`, cut at its first "
        "clause):",
        "",
        "| attack | answers |",
        "| --- | --- |",
        *(
            f"| {name} | {', '.join(f'{reason}: {n}' for reason, n in seen.most_common())} |"
            for name, seen in attacks.items()
            if seen
        ),
        "",
    ]


async def run(queries: int) -> tuple[Found, dict[str, Counter[str]]]:
    root = Path(tempfile.mkdtemp(prefix="gqlm-time-"))
    data_dir = root / "data"
    serve = Serve(data_dir, env={"GQL_MEMORY_EMBEDDING_PROVIDER": "hash"})
    try:
        serve.start()
        keys = await create_keys(data_dir)
        return await measure(serve.url, keys, queries)
    finally:
        serve.stop()
        stop_leftover_database(data_dir)


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-write", action="store_true", help="print, do not write docs/")
    parser.add_argument("--queries", type=int, default=QUERIES, help="victim searches per row")
    arguments = parser.parse_args(argv)
    load = os.getloadavg()[0]
    cost_rows = costs()
    found, attacks = asyncio.run(run(arguments.queries))
    lines = report(found, attacks, cost_rows, load)
    if not arguments.no_write:
        write_section(DOCS / "benchmarks-security.md", lines)
    return lines


if __name__ == "__main__":
    print("\n".join(main(sys.argv[1:])))
