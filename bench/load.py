"""Load and recovery benchmark: the long version of tests/test_load.py and test_reliability.py.

    python -m bench.load                        # default runs, writes docs/benchmarks-security.md
    python -m bench.load --seconds 60 --runs 2x64 4x128

Every server is a real `gql-memory serve` on 127.0.0.1 with API keys required and its own
embedded PostgreSQL in a temporary directory. Measured: requests/s and latency of a mixed
workload (tests/mixed_workload.py: 35% working-memory adds, 15% raw dialogue stores, 10% LRU
touches, 40% reads), errors (must be 0) and the working-memory invariants; then the recovery
times of a database outage, a SIGKILL of the server, a SIGKILL of the database and a SIGTERM
with a request in flight.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
from sqlalchemy import text

from bench.common import write_section
from gql_memory.db import Database
from gql_memory.db.embedded import start_embedded
from tests.mixed_workload import ADD, Load, seed_stable

DOCS = Path(__file__).resolve().parents[1] / "docs"
GQL_MEMORY = Path(sys.executable).parent / "gql-memory"
CAPACITY = 10
LOAD_SECTION = "## Load (mixed workload, zero errors required)"
RECOVERY_SECTION = "## Failure and recovery"


# --- processes ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Serve:
    """`gql-memory serve` with API keys required, on a free loopback port."""

    data_dir: Path
    workers: int = 1
    env: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> float:
        """Start and wait until /readyz answers 200; returns the seconds that took."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("GQL_MEMORY_")}
        env.pop("DATABASE_URL", None)
        env.update({"GQL_MEMORY_AUTH": "required", **self.env})
        started = time.perf_counter()
        self.process = subprocess.Popen(
            [
                str(GQL_MEMORY),
                "serve",
                "--port",
                str(self.port),
                "--workers",
                str(self.workers),
                "--data-dir",
                str(self.data_dir),
            ],  # fmt: skip
            stdout=(self.data_dir.parent / f"serve-{self.port}.log").open("ab"),
            stderr=subprocess.STDOUT,
            env=env,
        )
        while time.perf_counter() - started < 120:
            if self.process.poll() is not None:
                raise RuntimeError(f"serve exited with {self.process.returncode}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return time.perf_counter() - started
            except httpx.HTTPError:
                pass
            time.sleep(0.02)
        raise TimeoutError("serve did not become ready")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(60)


def create_key(data_dir: Path, database_url: str | None = None) -> str:
    """`gql-memory keys create` against the embedded database in data_dir (or DATABASE_URL)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GQL_MEMORY_")}
    env.pop("DATABASE_URL", None)
    if database_url:
        env["DATABASE_URL"] = database_url
    done = subprocess.run(
        [str(GQL_MEMORY), "keys", "create", "--namespace", "bench", "--scopes", "read,write",
         "--data-dir", str(data_dir)],
        capture_output=True, text=True, check=True, env=env,
    )  # fmt: skip
    return done.stdout.strip().splitlines()[-1]


def embedded_url(data_dir: Path) -> str:
    lines = (data_dir / "pgdata" / "postmaster.pid").read_text().splitlines()
    return f"postgresql+asyncpg://postgres@/gql_memory?host={lines[4]}&port={lines[3]}"


def postmaster_pid(data_dir: Path) -> int | None:
    pid_file = data_dir / "pgdata" / "postmaster.pid"
    return int(pid_file.read_text().split()[0]) if pid_file.exists() else None


def stop_leftover_database(data_dir: Path) -> None:
    pid = postmaster_pid(data_dir)
    if pid is not None and psutil.pid_exists(pid):
        start_embedded(data_dir).stop()


# --- checks ------------------------------------------------------------------------------------


async def invariant_violations(data_dir: Path, adds: Counter[str]) -> int:
    db = Database.from_url(embedded_url(data_dir))
    try:
        async with db.read() as conn:
            rows = await conn.execute(
                text(
                    "SELECT session_id, sum(w) AS working, sum(s) AS stale FROM ("
                    "SELECT session_id, count(*) w, 0 s FROM working_memory GROUP BY 1 UNION ALL "
                    "SELECT session_id, 0, count(*) FROM stale_memory GROUP BY 1) x GROUP BY 1"
                )
            )
            counts = {r.session_id: (r.working, r.stale) for r in rows}
    finally:
        await db.dispose()
    bad = 0
    for session, n in adds.items():
        working, stale = counts.get(session, (0, 0))
        bad += working + stale != n or working != min(n, CAPACITY)
    return bad


async def lost_turns(data_dir: Path, acked: set[str]) -> int:
    db = Database.from_url(embedded_url(data_dir))
    try:
        async with db.read() as conn:
            stored = set((await conn.execute(text("SELECT content FROM raw_dialogue"))).scalars())
    finally:
        await db.dispose()
    return len(acked - stored)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


def quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else 0


# --- scenarios ---------------------------------------------------------------------------------


async def throughput(root: Path, workers: int, clients: int, seconds: float) -> str:
    data_dir = root / f"load-{workers}x{clients}" / "data"
    data_dir.parent.mkdir()
    serve = Serve(data_dir, workers=workers)
    serve.start()
    try:
        key = create_key(data_dir)
        load = Load(serve.url, key, await seed_stable(serve.url, key))
        elapsed = await load.run(clients, seconds)
        bad = await invariant_violations(data_dir, load.adds)
    finally:
        serve.stop()
        stop_leftover_database(data_dir)
    requests = len(load.latencies) + len(load.errors)
    lat = load.latencies
    return (
        f"| {workers} | {clients} | {elapsed:.0f} s | {requests} | **{requests / elapsed:.0f}** | "
        f"{ms(quantile(lat, 50))} / {ms(quantile(lat, 95))} / {ms(quantile(lat, 99))} | "
        f"{len(load.errors)} | {'hold' if bad == 0 else f'{bad} sessions violated'} |"
    )


async def outage(root: Path) -> list[str]:
    """A server on an external database that goes away and comes back."""
    pg_dir = root / "outage" / "pg"
    pg_dir.parent.mkdir()
    pg = start_embedded(pg_dir)
    key = create_key(pg_dir, database_url=pg.url)
    serve = Serve(root / "outage" / "data", env={"DATABASE_URL": pg.url})
    serve.start()
    try:
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(base_url=serve.url, headers=headers, timeout=30) as client:
            assert await ok(client)
            pg.stop()
            failures = []
            for _ in range(20):
                started = time.perf_counter()
                query = {"query": "{ stats { sessions } }"}
                body = (await client.post("/graphql", json=query)).json()
                failures.append(time.perf_counter() - started)
                assert body["errors"][0]["extensions"]["code"] == "SERVICE_UNAVAILABLE"
            started = time.perf_counter()
            ready = await client.get("/readyz")
            ready_s = time.perf_counter() - started
            started = time.perf_counter()
            pg = start_embedded(pg_dir)
            restart_db_s = time.perf_counter() - started
            recovered = await until(lambda: ok(client), 30)
    finally:
        serve.stop()
        pg.stop()
    return [
        f"| database outage: a request while the database is down | "
        f"SERVICE_UNAVAILABLE in {ms(statistics.median(failures))} (max {ms(max(failures))}) |",
        f"| database outage: `/readyz` while down | {ready.status_code} in {ms(ready_s)} |",
        f"| database back (embedded restart took {ms(restart_db_s)}) → first successful request "
        f"| {ms(recovered)}, the server was not restarted |",
    ]


async def ok(client: httpx.AsyncClient) -> bool:
    body = (await client.post("/graphql", json={"query": "{ stats { sessions } }"})).json()
    return not body.get("errors")


async def until(predicate: Callable[[], Awaitable[bool]], timeout: float) -> float:
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        try:
            if await predicate():
                return time.perf_counter() - started
        except (httpx.HTTPError, ValueError):
            pass
        await asyncio.sleep(0.01)
    raise TimeoutError


async def crash(root: Path, what: str, clients: int) -> list[str]:
    data_dir = root / f"crash-{what}" / "data"
    data_dir.parent.mkdir()
    serve = Serve(data_dir)
    serve.start()
    try:
        key = create_key(data_dir)
        load = Load(serve.url, key, tolerate_errors=True)
        running = asyncio.gather(*(load.client(i, time.monotonic() + 60) for i in range(clients)))
        await asyncio.sleep(3)
        if what == "server":
            serve.process.kill()  # type: ignore[union-attr]
            serve.process.wait()  # type: ignore[union-attr]
        else:
            postmaster = psutil.Process(postmaster_pid(data_dir))
            for process in [postmaster, *postmaster.children(recursive=True)]:
                with contextlib.suppress(psutil.NoSuchProcess, ProcessLookupError):
                    process.kill()
            await asyncio.sleep(0.5)
            serve.stop()
        await asyncio.sleep(0.5)
        load.stop.set()
        await running
        again = Serve(data_dir)
        restart_s = again.start()
        lost = await lost_turns(data_dir, load.acked_turns)
        again.stop()
    finally:
        serve.stop()
        stop_leftover_database(data_dir)
    label = "SIGKILL of the server" if what == "server" else "SIGKILL of the embedded database"
    detail = "attaches to the running database" if what == "server" else "crash recovery"
    return [
        f"| {label} under {clients} writing clients → next `serve` ready ({detail}) | "
        f"{ms(restart_s)}; {len(load.acked_turns)} acknowledged turns, **{lost} lost** |"
    ]


async def drain(root: Path) -> list[str]:
    data_dir = root / "drain" / "data"
    data_dir.parent.mkdir()
    serve = Serve(data_dir, env={"GQL_MEMORY_AUTH": "optional"})
    serve.start()
    blocker = Database.from_url(embedded_url(data_dir))
    try:
        async with httpx.AsyncClient(base_url=serve.url, timeout=30) as client:
            async with blocker.write() as conn:
                await conn.execute(
                    text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))"),
                    {"k": "wm\x1fdefault\x1fdrain"},
                )
                request = asyncio.create_task(
                    client.post(
                        "/graphql", json={"query": ADD, "variables": {"c": "x", "s": "drain"}}
                    )
                )
                await asyncio.sleep(0.5)
                sent = time.perf_counter()
                serve.process.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
                await asyncio.sleep(1.0)
            response = await request
            await asyncio.to_thread(serve.process.wait, 60)  # type: ignore[union-attr]
            stopped = time.perf_counter() - sent
        clean = postmaster_pid(data_dir) is None
    finally:
        await blocker.dispose()
        serve.stop()
        stop_leftover_database(data_dir)
    answered = (
        "answered 200"
        if response.status_code == 200 and "errors" not in response.json()
        else "FAILED"
    )
    return [
        f"| SIGTERM with a request in flight (held 1 s by a lock) | request {answered}; process "
        f"and database stopped {ms(stopped)} after the signal; clean database stop: {clean} |"
    ]


async def main(
    seconds: float, runs: list[tuple[int, int]], crash_clients: int
) -> tuple[list[str], list[str]]:
    """The load section and the recovery section of the results document."""
    root = Path(tempfile.mkdtemp(prefix="gqlm-bench-"))
    try:
        lines = [
            LOAD_SECTION,
            "",
            f"Measured {time.strftime('%Y-%m-%d')} with `python -m bench.load` on "
            f"{platform.machine()}, {os.cpu_count()} cores (shared with other work while "
            f"measured), Python {platform.python_version()}, embedded PostgreSQL 18. "
            "Clients and server run on the same machine, API keys required (verified per "
            "request from the in-process cache).",
            "",
            "35% working-memory adds on 16 hot sessions (every add evicts and archives once full), "
            "15% raw dialogue stores, 10% LRU touches, 40% reads (working memory, raw dialogue "
            "page, stale memory page + stats).",
            "",
            "| workers | clients | duration | requests | requests/s | latency p50 / p95 / p99 "
            "| errors | working-memory invariants |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for workers, clients in runs:
            print(f"load: {workers} workers, {clients} clients, {seconds:.0f} s", flush=True)
            lines.append(await throughput(root, workers, clients, seconds))
        lines += [
            "",
            "Reading the numbers: the load generator (one Python process, httpx), both server "
            "workers and PostgreSQL share the same cores, so with 2 cores a second worker has no "
            "idle core to use and the client itself is a bottleneck; latencies include the "
            "client's own queueing. The rate is a floor for this machine, not a ceiling of the "
            "server; what must hold everywhere is the zero-error and invariant columns.",
        ]
        recovery = [RECOVERY_SECTION, "", "| scenario | result |", "| --- | --- |"]
        print("outage", flush=True)
        recovery += await outage(root)
        for what in ("server", "database"):
            print(f"crash: {what}", flush=True)
            recovery += await crash(root, what, crash_clients)
        print("drain", flush=True)
        recovery += await drain(root)
        recovery += [
            "",
            "Acknowledged means: the client got a 200 with data. The suite runs shorter versions "
            "of all of these (tests/test_load.py, tests/test_reliability.py).",
        ]
        return lines, recovery
    finally:
        shutil.rmtree(root, ignore_errors=True)


def parse_runs(values: list[str]) -> list[tuple[int, int]]:
    return [tuple(int(x) for x in v.split("x")) for v in values]  # type: ignore[misc]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--runs", nargs="+", default=["1x32", "2x64"], help="WORKERSxCLIENTS")
    parser.add_argument("--crash-clients", type=int, default=16)
    parser.add_argument("--output", type=Path, default=DOCS / "benchmarks-security.md")
    args = parser.parse_args()
    sections = asyncio.run(main(args.seconds, parse_runs(args.runs), args.crash_clients))
    for section in sections:  # the document's other sections (fuzzing, soak) stay
        write_section(args.output, section)
        print("\n".join(section))
