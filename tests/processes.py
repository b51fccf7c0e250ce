"""Real `gql-memory serve` processes for the reliability and load tests (127.0.0.1 only)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

GQL_MEMORY = Path(sys.executable).parent / "gql-memory"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def embedded_url(data_dir: Path, database: str = "gql_memory") -> str:
    """An asyncpg URL of the embedded server that a serve process runs in ``data_dir``."""
    lines = (data_dir / "pgdata" / "postmaster.pid").read_text().splitlines()
    port, socket_dir = lines[3], lines[4]  # postmaster.pid: pid, datadir, start, port, socket
    return f"postgresql+asyncpg://postgres@/{database}?host={socket_dir}&port={port}"


def postmaster_pid(data_dir: Path) -> int | None:
    pid_file = data_dir / "pgdata" / "postmaster.pid"
    if not pid_file.exists():
        return None
    return int(pid_file.read_text().split()[0])


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@dataclass
class ServeProcess:
    """`gql-memory serve` on a free loopback port, with a temporary data dir."""

    data_dir: Path
    workers: int = 1
    env: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    executable: Path = GQL_MEMORY  # the suite's own; tests/test_wheel.py runs an installed one
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> ServeProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GQL_MEMORY_")}
        env.pop("DATABASE_URL", None)
        env.update(
            {
                "GQL_MEMORY_SHUTDOWN_TIMEOUT_S": "20",
                "GQL_MEMORY_EMBEDDING_PROVIDER": "hash",  # the suite's embedder (conftest)
                **self.env,
            }
        )
        self.log_path = self.data_dir.parent / f"serve-{self.port}.log"
        self.process = subprocess.Popen(
            [
                str(self.executable),
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--workers",
                str(self.workers),
                "--data-dir",
                str(self.data_dir),
            ],  # fmt: skip
            stdout=self.log_path.open("ab"),
            stderr=subprocess.STDOUT,
            env=env,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"serve exited with {self.process.returncode}:\n{self.log()}")
            try:
                if httpx.get(f"{self.base_url}/readyz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"serve did not become ready:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path else ""

    async def until_logged(self, line: str, timeout: float = 60) -> None:
        """Returns once the server's log has a line containing ``line``."""

        async def logged() -> bool:
            return line in self.log()

        await wait_until(logged, timeout, message=f"{line!r} not in the log:\n{self.log()[-3000:]}")

    def signal(self, sig: signal.Signals) -> None:
        assert self.process is not None
        self.process.send_signal(sig)

    def wait(self, timeout: float = 60) -> int:
        assert self.process is not None
        return self.process.wait(timeout)

    def stop(self) -> None:
        """SIGTERM and wait (SIGKILL if it does not stop); safe to call twice."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


async def graphql(
    client: httpx.AsyncClient, query: str, variables: dict[str, Any] | None = None
) -> dict[str, Any]:
    response = await client.post("/graphql", json={"query": query, "variables": variables or {}})
    return response.json()


async def wait_until(
    predicate: Any, timeout: float = 60, interval: float = 0.05, message: str = ""
) -> None:
    """Await ``predicate()`` until it is true (connection errors count as false); fails after
    ``timeout`` seconds, a generous bound that only turns a hang into a failure."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if await predicate():
                return
        except (httpx.HTTPError, OSError):
            pass
        if time.monotonic() > deadline:
            name = getattr(predicate, "__name__", repr(predicate))
            raise TimeoutError(message or f"{name} still false after {timeout} s")
        await asyncio.sleep(interval)


def stop_embedded_leftovers(data_dir: Path) -> None:
    """If a test left the embedded server running (serve was SIGKILLed), stop it cleanly."""
    pid = postmaster_pid(data_dir)
    if pid is not None and process_alive(pid):
        from gql_memory.db.embedded import start_embedded

        start_embedded(data_dir).stop()  # attach, then stop as its last user
