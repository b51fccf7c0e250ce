"""Shared helpers for benchmarks: a server subprocess on a free loopback port, percentiles."""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.embedded import start_embedded
from gql_memory.db.migrate import upgrade
from gql_memory.memory import Memory

DOCS = Path(__file__).resolve().parents[1] / "docs"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    """q in 0..100 (inclusive method, like numpy's default 'linear')."""
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


@dataclass
class ServerProcess:
    url: str
    process: subprocess.Popen[bytes]
    cold_start_s: float


@contextmanager
def server(workers: int = 1, data_dir: Path | None = None, **env: str) -> Iterator[ServerProcess]:
    """`gql-memory serve` in a subprocess on the embedded database; waits for a first answer."""
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        environment = {**os.environ, **env}
        if "DATABASE_URL" not in env:
            environment.pop("DATABASE_URL", None)
        started = time.perf_counter()
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gql_memory",
                "serve",
                "--port",
                str(port),
                "--workers",
                str(workers),
                "--data-dir",
                str(data_dir or Path(tmp) / "data"),
            ],
            env=environment,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        deadline = started + 60
        while True:
            try:
                response = httpx.post(
                    f"{url}/graphql", json={"query": "{ stats { sessions } }"}, timeout=1
                )
                if response.status_code == 200 and "errors" not in response.json():
                    break
            except httpx.HTTPError:
                pass
            if time.perf_counter() > deadline or process.poll() is not None:
                process.kill()
                raise RuntimeError("server did not start")
            time.sleep(0.02)
        try:
            yield ServerProcess(url, process, time.perf_counter() - started)
        finally:
            process.terminate()
            process.wait(30)


@asynccontextmanager
async def embedded_memory(dim: int = 384) -> AsyncIterator[Memory]:
    """Services of the default namespace on a fresh embedded PostgreSQL in a temp dir."""
    with tempfile.TemporaryDirectory() as tmp:
        pg = start_embedded(Path(tmp) / "data")
        db = None
        try:
            settings = Settings(
                database_url=pg.url,
                embedding_provider="hash",
                hash_embedding_dim=dim,
                statement_timeout_ms=0,  # index builds over 100k rows outlast 30 s
            )
            db = Database.from_url(pg.url, settings)
            await upgrade(db, dim)
            yield Memory(db, settings)
        finally:
            if db is not None:
                await db.dispose()
            pg.stop()


def write_section(path: Path, lines: list[str]) -> None:
    """Replace (or append) the section ``lines`` starts with (its "## " heading) in a
    results document; every other section stays as it is."""
    heading = lines[0]
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    if heading in text:
        before, _, after = text.partition(heading)
        rest = after.split("\n## ", 1)
        after = "\n\n## " + rest[1] if len(rest) > 1 else ""
        text = before.rstrip("\n") + "\n\n" + "\n".join(lines) + after
    else:
        text = text.rstrip("\n") + "\n\n" + "\n".join(lines)
    path.parent.mkdir(exist_ok=True)
    path.write_text(text.rstrip("\n") + "\n")


T = TypeVar("T")


def run_async(coroutine: Awaitable[T]) -> T:
    """On uvloop when installed, like the server: both sides get the same event loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)  # type: ignore[arg-type]
    return uvloop.run(coroutine)  # type: ignore[arg-type]


async def vacuum_analyze(db: Database, *tables: str) -> None:
    """Settle tables as autovacuum would (visibility map, hint bits, statistics), so that
    measurements neither race a background VACUUM nor run on plans for empty tables."""
    from sqlalchemy import text

    async with db.engine.connect() as raw:
        conn = await raw.execution_options(isolation_level="AUTOCOMMIT")
        for table in tables:
            await conn.execute(text(f"VACUUM ANALYZE {table}"))
