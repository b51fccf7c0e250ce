"""Soak: the embedding server hangs for a minute under writes and searches (issue 43, items 3-4).

    python -m bench.embedder_outage                  # 20 s calm, 60 s hang, 20 s calm; writes
    python -m bench.embedder_outage --hang-seconds 30 --writers 8 --no-write

One real `gql-memory serve` (API keys required, its own embedded PostgreSQL in a temporary
directory) on the openai provider, against tests/fake_openai.py served by uvicorn on its own
event loop in a thread of this process, and the provider's default budget, circuit breaker
and backfill interval. Writers loop over storeRawDialogue, addInsight and storeEpisode, each
with new content, and keep the id of every acknowledged write (an answer with data and no
errors); searchers loop over search in RAW and INSIGHT. Phases: before (the embedder answers),
hang (it accepts every request and answers none, FakeOpenAI.hang), after (released). Then the
clients stop and `stats { embeddingsWaiting }` is polled until 0. Verdict, read from the
database itself: every acknowledged write is there with its vector and no longer waiting, and
every search during the hang was answered. The section "Soak: the embedder hangs ..." of
docs/benchmarks-security.md is replaced; the rest of the file is kept.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import random
import re
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from sqlalchemy import text

from bench.common import DOCS, percentile, write_section
from bench.load import Serve, embedded_url, ms, stop_leftover_database
from bench.soak import error_lines, stop
from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.keys import ApiKeyStore
from tests.fake_openai import FakeOpenAI

SECTION = "## Soak: the embedder hangs for a minute"
PHASES = ("before", "hang", "after")
NAMESPACE = "outage"
REQUEST_TIMEOUT_S = 60.0  # beyond the server's own deadline (30 s): it answers TIMEOUT first
DRAIN_LIMIT_S = 180.0  # the most the waiting rows may take to be embedded after the clients stop
WORDS = (
    "berlin paris meeting deadline budget coffee flight hotel report invoice "
    "dentist garden printer contract museum train"
).split()

STORE_RAW = (
    "mutation($s: String!, $c: String!) { storeRawDialogue(input: {sessionId: $s, "
    'speaker: "user", content: $c}) { id } }'
)
ADD_INSIGHT = "mutation($c: String!) { addInsight(input: {content: $c}) { id } }"
STORE_EPISODE = (
    "mutation($c: String!) { storeEpisode(input: {query: $c, reward: 0.5, "
    'reflection: "keep going"}) { id } }'
)
# mutation -> (its query, the table its rows land in)
WRITES = {
    "storeRawDialogue": (STORE_RAW, "raw_dialogue"),
    "addInsight": (ADD_INSIGHT, "insights"),
    "storeEpisode": (STORE_EPISODE, "episodes"),
}
SEARCH = (
    "query($q: String!) { search(query: $q, layers: [RAW, INSIGHT], topK: 10) "
    "{ id vectorLegSkipped } }"
)
WAITING = "{ stats { embeddingsWaiting } }"


def default(name: str) -> Any:
    """A setting's default: the server runs with them (Serve drops GQL_MEMORY_* variables)."""
    return Settings.model_fields[name].default


# --- the embedding server ----------------------------------------------------------------------


class FakeEmbedder:
    """FakeOpenAI on uvicorn, on its own event loop in a thread: it answers whatever the
    bench's clients keep this process's main loop busy with. hang() and release() run on
    its loop (FakeOpenAI's event belongs there)."""

    def __init__(self) -> None:
        self.fake = FakeOpenAI()
        self.loop = asyncio.new_event_loop()
        config = uvicorn.Config(
            self.fake.app(), log_level="warning", access_log=False, lifespan="off"
        )
        self.server = uvicorn.Server(config)
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.bind(("127.0.0.1", 0))
        self.fake.base_url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        serve = self.server.serve(sockets=[sock])
        self.thread = threading.Thread(
            target=self.loop.run_until_complete, args=(serve,), name="fake embedder", daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the fake embedding server did not start")
            time.sleep(0.01)

    @property
    def requests(self) -> int:
        """Embedding requests received so far (hung ones included)."""
        return len(self.fake.requests)

    def hang(self) -> None:
        self.loop.call_soon_threadsafe(self.fake.hang)

    def release(self) -> None:
        self.loop.call_soon_threadsafe(self.fake.release)

    def stop(self) -> None:
        self.release()
        self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(30)
        self.loop.close()


# --- recording ---------------------------------------------------------------------------------


@dataclass
class Outage:
    """The current phase (a request is filed under the phase it started in) and the records."""

    phase: str = "before"
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    # phase -> table -> acknowledged ids
    acked: dict[str, dict[str, list[int]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    write_latency: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    write_errors: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    search_latency: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    search_failures: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    skipped: Counter[str] = field(default_factory=Counter)  # answers with vectorLegSkipped
    read_latency: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    # (monotonic time, phase, embedder state or the HTTP failure) of each /readyz probe
    readyz: list[tuple[float, str, str]] = field(default_factory=list)
    waiting: list[tuple[float, int]] = field(default_factory=list)  # (monotonic time, count)
    first_errors: list[str] = field(default_factory=list)

    def note(self, problem: str) -> None:
        if len(self.first_errors) < 20:
            self.first_errors.append(problem[:300])


def error_codes(body: Any) -> str | None:
    """None for an answer with data and no errors; else its error codes."""
    if not isinstance(body, dict):
        return "no JSON object"
    if errors := body.get("errors"):
        return "/".join(
            sorted({(e.get("extensions") or {}).get("code", "uncoded") for e in errors})
        )
    return None if body.get("data") else "no data"


async def post(client: httpx.AsyncClient, query: str, variables: dict[str, Any]) -> Any:
    """The answer's body; the exception's name for a failure of the transport or of JSON."""
    try:
        response = await client.post("/graphql", json={"query": query, "variables": variables})
        return response.json()
    except (httpx.HTTPError, ValueError) as exc:
        return type(exc).__name__


# --- clients -----------------------------------------------------------------------------------


async def writer(client: httpx.AsyncClient, number: int, outage: Outage) -> None:
    """storeRawDialogue, addInsight and storeEpisode in turn, each with new content."""
    rng = random.Random(f"writer-{number}")
    sequence = 0
    while not outage.stop.is_set():
        mutation = list(WRITES)[sequence % len(WRITES)]
        query, table = WRITES[mutation]
        sequence += 1
        content = f"w{number}-{sequence} " + " ".join(rng.choices(WORDS, k=6))
        phase, started = outage.phase, time.perf_counter()
        body = await post(client, query, {"c": content, "s": f"s{number}"})
        outage.write_latency[phase].append(time.perf_counter() - started)
        problem = error_codes(body) if not isinstance(body, str) else body
        if problem is None:
            outage.acked[phase][table].append(int(body["data"][mutation]["id"]))
        else:
            outage.write_errors[phase][problem] += 1
            outage.note(f"{phase} {mutation}: {body}")
            await asyncio.sleep(0.05)


async def searcher(client: httpx.AsyncClient, number: int, outage: Outage) -> None:
    rng = random.Random(f"searcher-{number}")
    while not outage.stop.is_set():
        phase, started = outage.phase, time.perf_counter()
        body = await post(client, SEARCH, {"q": " ".join(rng.choices(WORDS, k=2))})
        outage.search_latency[phase].append(time.perf_counter() - started)
        problem = error_codes(body) if not isinstance(body, str) else body
        if problem is None:
            if any(hit["vectorLegSkipped"] for hit in body["data"]["search"]):
                outage.skipped[phase] += 1
        else:
            outage.search_failures[phase][problem] += 1
            outage.note(f"{phase} search: {body}")
            await asyncio.sleep(0.05)


async def probe_readyz(url: str, outage: Outage, done: asyncio.Event) -> None:
    """/readyz every second: the embedder's state as the server reports it."""
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        while not done.is_set():
            phase = outage.phase
            try:
                response = await client.get("/readyz")
                body = response.json()
                state = str(body.get("embedder", {}).get("state", "absent"))
                if response.status_code != 200:
                    state = f"HTTP {response.status_code} ({state})"
            except (httpx.HTTPError, ValueError) as exc:
                state = type(exc).__name__
            outage.readyz.append((time.monotonic(), phase, state))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), 1)


async def watch_waiting(client: httpx.AsyncClient, outage: Outage, done: asyncio.Event) -> None:
    """stats { embeddingsWaiting } every second: also the latency of a read that embeds
    nothing, which waits only for an admission slot and the database."""
    while not done.is_set():
        phase, started = outage.phase, time.perf_counter()
        body = await post(client, WAITING, {})
        outage.read_latency[phase].append(time.perf_counter() - started)
        if not isinstance(body, str) and error_codes(body) is None:
            outage.waiting.append((time.monotonic(), body["data"]["stats"]["embeddingsWaiting"]))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), 1)


# --- the run -----------------------------------------------------------------------------------


@dataclass
class Result:
    outage: Outage
    writers: int
    searchers: int
    durations: dict[str, float]
    embedding_requests: dict[str, int]
    release_to_zero_s: float | None  # None: rows still waiting after DRAIN_LIMIT_S
    release_to_ok_s: float | None  # to the first /readyz with the embedder ok
    missing: dict[str, int]  # table -> acknowledged ids not in the database
    without_vector: dict[str, int]  # table -> acknowledged rows without a vector, or waiting
    backfilled: dict[str, float]  # gql_memory_embeddings_backfilled_total, per table
    log_errors: list[str]
    load_average: float


async def create_key(data_dir: Path) -> str:
    db = Database.from_url(embedded_url(data_dir))
    try:
        return (await ApiKeyStore(db).create(NAMESPACE, "read,write", name="outage")).secret
    finally:
        await db.dispose()


async def verify(
    data_dir: Path, acked: dict[str, list[int]]
) -> tuple[dict[str, int], dict[str, int]]:
    """Per table: acknowledged ids missing from the database, and those without a vector
    (or still marked waiting)."""
    db = Database.from_url(embedded_url(data_dir))
    missing, without_vector = {}, {}
    try:
        async with db.read() as conn:
            for table, ids in acked.items():
                rows = (
                    await conn.execute(
                        text(
                            f"SELECT id, embedding IS NOT NULL AND NOT embedding_waiting AS done "
                            f"FROM {table} WHERE id = ANY(CAST(:ids AS bigint[]))"
                        ),
                        {"ids": ids},
                    )
                ).all()
                missing[table] = len(set(ids) - {row.id for row in rows})
                without_vector[table] = sum(not row.done for row in rows)
    finally:
        await db.dispose()
    return missing, without_vector


async def drain(client: httpx.AsyncClient, outage: Outage) -> bool:
    """Poll until no row waits for its vector (True), or DRAIN_LIMIT_S have passed."""
    deadline = time.monotonic() + DRAIN_LIMIT_S
    while time.monotonic() < deadline:
        body = await post(client, WAITING, {})
        if not isinstance(body, str) and error_codes(body) is None:
            count = body["data"]["stats"]["embeddingsWaiting"]
            outage.waiting.append((time.monotonic(), count))
            if count == 0:
                return True
        await asyncio.sleep(0.5)
    return False


def release_to_zero(samples: list[tuple[float, int]], released: float) -> float:
    """Seconds from the release to the first sample of 0 after the last waiting row was seen."""
    after = [(t, n) for t, n in samples if t >= released]
    last_waiting = max((i for i, (_, n) in enumerate(after) if n), default=-1)
    return after[last_waiting + 1][0] - released


async def backfilled(url: str) -> dict[str, float]:
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        exposition = (await client.get("/metrics")).text
    pattern = r'^gql_memory_embeddings_backfilled_total\{table="(\w+)"\} (\S+)$'
    return {m[1]: float(m[2]) for m in re.finditer(pattern, exposition, re.MULTILINE)}


async def run(seconds: float, hang_seconds: float, writers: int, searchers: int) -> Result:
    embedder = FakeEmbedder()
    embedder.start()
    root = Path(tempfile.mkdtemp(prefix="gqlm-outage-"))
    data_dir = root / "data"
    data_dir.mkdir()
    serve = Serve(
        data_dir,
        env={
            "GQL_MEMORY_EMBEDDING_PROVIDER": "openai",
            "GQL_MEMORY_EMBEDDING_DIM": str(embedder.fake.dim),
            "OPENAI_BASE_URL": embedder.fake.base_url,
            "OPENAI_API_KEY": "sk-bench",
            "GQL_MEMORY_METRICS_PUBLIC": "true",  # the backfill counters, read at the end
        },
    )
    try:
        print("starting the server", flush=True)
        serve.start()
        headers = {"Authorization": f"Bearer {await create_key(data_dir)}"}
        outage, load_average = Outage(), os.getloadavg()[0]
        durations, requests = {}, {}
        monitors_done = asyncio.Event()
        async with httpx.AsyncClient(
            base_url=serve.url, headers=headers, timeout=REQUEST_TIMEOUT_S
        ) as client:
            clients = [asyncio.create_task(writer(client, i, outage)) for i in range(writers)]
            clients += [asyncio.create_task(searcher(client, i, outage)) for i in range(searchers)]
            readyz_done = asyncio.Event()
            monitors = [
                asyncio.create_task(probe_readyz(serve.url, outage, readyz_done)),
                asyncio.create_task(watch_waiting(client, outage, monitors_done)),
            ]
            released = 0.0
            for phase, length in zip(PHASES, (seconds, hang_seconds, seconds), strict=True):
                print(f"{phase}: {length:.0f} s", flush=True)
                outage.phase, started, sent = phase, time.monotonic(), embedder.requests
                if phase == "hang":
                    embedder.hang()
                await asyncio.sleep(length)
                if phase == "hang":
                    embedder.release()
                    released = time.monotonic()
                durations[phase] = time.monotonic() - started
                requests[phase] = embedder.requests - sent
            print("clients stop; waiting for the waiting rows to be embedded", flush=True)
            outage.stop.set()
            await asyncio.gather(*clients)
            outage.phase = "drain"
            monitors_done.set()
            drained = await drain(client, outage)
            readyz_done.set()
            await asyncio.gather(*monitors)
        to_zero = release_to_zero(outage.waiting, released) if drained else None
        ok_again = next(
            (t - released for t, _, state in outage.readyz if t >= released and state == "ok"),
            None,
        )
        acked: dict[str, list[int]] = defaultdict(list)
        for tables in outage.acked.values():
            for table, ids in tables.items():
                acked[table] += ids
        missing, without_vector = await verify(data_dir, acked)
        counters = await backfilled(serve.url)
    except BaseException:
        log = root / f"serve-{serve.port}.log"
        if log.exists():  # the server's own account of what went wrong, before it is deleted
            print("server log (tail):", *log.read_text().splitlines()[-20:], sep="\n")
        raise
    finally:
        stop(serve)
        embedder.stop()
        stop_leftover_database(data_dir)
        log_errors = error_lines(root / f"serve-{serve.port}.log")
        shutil.rmtree(root, ignore_errors=True)
    return Result(
        outage,
        writers,
        searchers,
        durations,
        requests,
        to_zero,
        ok_again,
        missing,
        without_vector,
        counters,
        log_errors,
        load_average,
    )


# --- report ------------------------------------------------------------------------------------


def p(values: list[float], q: float) -> float:
    return percentile(values, q) if values else 0.0


def counted(counts: Counter[str]) -> str:
    return ", ".join(f"{key} {n}" for key, n in counts.most_common()) or "0"


def by_table(outage: Outage, phase: str) -> str:
    return " / ".join(str(len(outage.acked[phase][table])) for _, table in WRITES.values())


def readyz_states(result: Result, phase: str) -> str:
    return counted(Counter(state for _, seen, state in result.outage.readyz if seen == phase))


def report(result: Result, hang_seconds: float, seconds: float) -> tuple[list[str], bool]:
    outage = result.outage
    acked = {phase: sum(map(len, outage.acked[phase].values())) for phase in PHASES}
    total = sum(acked.values())
    lost, unembedded = sum(result.missing.values()), sum(result.without_vector.values())
    hang_search_failures = sum(outage.search_failures["hang"].values())
    ok = (
        lost == 0
        and unembedded == 0
        and hang_search_failures == 0
        and result.release_to_zero_s is not None
    )
    row = " | ".join
    budget = default("embedding_budget_s")
    cooldown = default("embedding_breaker_cooldown_s")
    lines = [
        SECTION,
        "",
        f"Measured {time.strftime('%Y-%m-%d')} with `python -m bench.embedder_outage` on "
        f"{platform.machine()} ({platform.system()}), {os.cpu_count()} cores, Python "
        f"{platform.python_version()}: one `gql-memory serve` (1 worker, API keys required, "
        "embedded PostgreSQL) on 127.0.0.1 with the openai provider against a local fake "
        "OpenAI-compatible server (tests/fake_openai.py, 384-dimension hash vectors, on its own "
        "event loop in the clients' process), with the default per-request timeout "
        f"({default('embedding_timeout_s'):g} s), retries ({default('embedding_max_retries')}), "
        f"budget per batch ({default('embedding_budget_s'):g} s), circuit breaker (open after "
        f"{default('embedding_breaker_failures')} failed calls, for "
        f"{default('embedding_breaker_cooldown_s'):g} s), backfill interval "
        f"({default('embedding_backfill_interval_s'):g} s) and admission slots "
        f"({default('admission_slots')}). {result.writers} writers loop over storeRawDialogue, "
        "addInsight and storeEpisode in turn, each with new content; "
        f"{result.searchers} searchers loop over search in RAW and INSIGHT. Phases: before "
        f"({result.durations['before']:.0f} s), hang ({result.durations['hang']:.0f} s: the "
        "embedding server accepts every request and answers none), after "
        f"({result.durations['after']:.0f} s, released). Then the clients stop and "
        "`stats { embeddingsWaiting }` is polled until 0. A request counts in the phase it "
        "started in; its latency includes client queueing. Lost and without a vector are read "
        "from the database. 1-minute load average at the start: "
        f"{result.load_average:.1f} (other work on the machine shows here).",
        "",
        "| | " + row(PHASES) + " |",
        "| --- |" + " --- |" * len(PHASES),
        "| writes acknowledged (raw / insight / episode) | "
        + row(f"{acked[phase]} ({by_table(outage, phase)})" for phase in PHASES)
        + " |",
        "| write errors | " + row(counted(outage.write_errors[phase]) for phase in PHASES) + " |",
        "| write latency p50 / p95 / max | "
        + row(
            f"{ms(p(lat, 50))} / {ms(p(lat, 95))} / {ms(max(lat, default=0))}"
            for lat in (outage.write_latency[phase] for phase in PHASES)
        )
        + " |",
        "| searches answered / failed | "
        + row(
            f"{len(outage.search_latency[phase]) - sum(outage.search_failures[phase].values())}"
            f" / {counted(outage.search_failures[phase])}"
            for phase in PHASES
        )
        + " |",
        "| answered with vectorLegSkipped | "
        + row(str(outage.skipped[phase]) for phase in PHASES)
        + " |",
        "| search latency p50 / p95 / max | "
        + row(
            f"{ms(p(lat, 50))} / {ms(p(lat, 95))} / {ms(max(lat, default=0))}"
            for lat in (outage.search_latency[phase] for phase in PHASES)
        )
        + " |",
        "| `stats` (embeds nothing; every second) latency max | "
        + row(ms(max(outage.read_latency[phase], default=0)) for phase in PHASES)
        + " |",
        "| /readyz embedder state (probed every second) | "
        + row(readyz_states(result, phase) for phase in PHASES)
        + " |",
        "| embedding requests the fake received | "
        + row(str(result.embedding_requests[phase]) for phase in PHASES)
        + " |",
        "",
        f"**Acknowledged writes: {total}; lost: {lost}; left without a vector: {unembedded}.** "
        "Release → no row waiting: "
        + (
            f"{result.release_to_zero_s:.0f} s"
            if result.release_to_zero_s is not None
            else f"**still waiting {DRAIN_LIMIT_S:.0f} s after the clients stopped**"
        )
        + f" (most rows waiting at once: {max((n for _, n in outage.waiting), default=0)}; "
        "/readyz said the embedder was ok again after "
        + (f"{result.release_to_ok_s:.0f} s" if result.release_to_ok_s is not None else "never")
        + "; "
        "embedded by the background worker: "
        + (", ".join(f"{t} {n:.0f}" for t, n in result.backfilled.items()) or "none")
        + f"). Searches failed during the hang: {hang_search_failures}. Server log lines at "
        f"ERROR: {len(result.log_errors)}. Verdict: "
        + (
            "**met** (0 acknowledged writes lost, every one embedded after the embedder "
            "returned, searches answered throughout)."
            if ok
            else "**MISSED**."
        ),
        "",
        "Reading it: the server learns that the embedder hangs from its calls. For the first "
        f"{budget:g} s of the hang (the budget per batch) /readyz still says ok, and the "
        "requests that embed wait for the budget; they hold no admission slot meanwhile "
        "(server/admission.py, OutsideTheSlot), so requests that embed nothing are answered "
        "as before (the `stats` row). Then the rows are stored "
        "waiting, searches answer from their text leg, and the failed calls open the breaker "
        "(`down`): calls fail at once, and only its probe, "
        f"{cooldown:g} s after the last failure, waits for the budget again. After the release "
        f"the embedder is used again from the breaker's next probe, at most {cooldown:g} s "
        "later (the time /readyz says ok again); the writes until then are stored waiting too, "
        "and the background worker embeds the waiting rows on its next passes.",
        "",
        f"Replay: `python -m bench.embedder_outage --seconds {seconds:g} --hang-seconds "
        f"{hang_seconds:g} --writers {result.writers} --searchers {result.searchers}`.",
    ]
    problems = outage.first_errors + result.log_errors
    if problems:
        lines += ["", "First problems:", ""] + [f"    {x[:300]}" for x in problems[:20]]
    return lines, ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.embedder_outage", description=__doc__)
    parser.add_argument("--seconds", type=float, default=20, help="per calm phase")
    parser.add_argument("--hang-seconds", type=float, default=60, help="the hang")
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--searchers", type=int, default=2)
    parser.add_argument("--no-write", action="store_true", help="only print the section")
    args = parser.parse_args(argv)
    result = asyncio.run(run(args.seconds, args.hang_seconds, args.writers, args.searchers))
    lines, ok = report(result, args.hang_seconds, args.seconds)
    if not args.no_write:
        write_section(DOCS / "benchmarks-security.md", lines)
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
