"""What OpenTelemetry tracing costs: addWorkingMemory and search over HTTP with tracing off
(no OTEL_* variables: no hook installed) and on (every span exported over OTLP/HTTP to a
receiver on 127.0.0.1 that discards them), the same requests on fresh servers in turns.

``GQL_MEMORY_BENCH_BEFORE=<checkout>`` adds a third side: the server of another checkout
(e.g. a worktree of the commit before tracing), run as it is, to show that off costs what the
code without tracing cost; ``GQL_MEMORY_BENCH_SIDES=before,off`` runs only the sides named.

    .venv/bin/python -m bench tracing
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import psutil

from bench.common import percentile, server

WARMUP = 100
REQUESTS = 400
ROUNDS = 6
ENV = {"GQL_MEMORY_EMBEDDING_PROVIDER": "hash", "GQL_MEMORY_LOG_LEVEL": "WARNING"}
ADD = (
    "mutation Add($c: String!, $s: String!) "
    "{ addWorkingMemory(input: {content: $c, sessionId: $s}) { currentCount } }"
)
SEARCH = "query Find($q: String!) { search(query: $q, topK: 5) { id } }"


@contextmanager
def otlp_sink(received: list[int]) -> Iterator[str]:
    """An OTLP/HTTP endpoint on 127.0.0.1 that accepts every export, counts its bytes in
    ``received`` and discards it."""

    class Sink(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            received.append(len(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    sink = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{sink.server_address[1]}"
    finally:
        sink.shutdown()
        sink.server_close()


def timed(client: httpx.Client, query: str, variables: dict[str, str]) -> float:
    started = time.perf_counter()
    response = client.post("/graphql", json={"query": query, "variables": variables})
    elapsed = time.perf_counter() - started
    assert "errors" not in response.json(), response.text
    return elapsed


def server_cpu(pid: int) -> float:
    """CPU seconds of the server's Python processes (not PostgreSQL's, which tracing does
    not touch): on a busy machine, a steadier measure of the work per request than latency."""
    root = psutil.Process(pid)
    processes = [root, *(p for p in root.children(recursive=True) if "python" in p.name())]
    return sum(sum(p.cpu_times()[:2]) for p in processes)


def measure(env: dict[str, str], cwd: str | None = None) -> dict[str, list[float]]:
    """Latencies (s) of addWorkingMemory and search, one request at a time, and the server's
    CPU seconds per request of each (``<operation> cpu``)."""
    before = os.getcwd()
    if cwd:
        os.chdir(cwd)  # `python -m gql_memory` imports the package of the working directory
    try:
        with server(**ENV, **env) as process, httpx.Client(base_url=process.url) as client:
            for i in range(WARMUP):
                timed(client, ADD, {"c": f"warm-up note {i} about tea", "s": f"s{i % 20}"})
                timed(client, SEARCH, {"q": f"note {i} tea"})
            pid = process.process.pid
            cpu = server_cpu(pid)
            add = [
                timed(client, ADD, {"c": f"note {i} about green tea", "s": f"s{i % 20}"})
                for i in range(REQUESTS)
            ]
            add_cpu, cpu = server_cpu(pid) - cpu, server_cpu(pid)
            search = [timed(client, SEARCH, {"q": f"green tea note {i}"}) for i in range(REQUESTS)]
            search_cpu = server_cpu(pid) - cpu
    finally:
        os.chdir(before)
    return {
        "addWorkingMemory": add,
        "search": search,
        "addWorkingMemory cpu": [add_cpu / REQUESTS],
        "search cpu": [search_cpu / REQUESTS],
    }


def main() -> list[str]:
    before = os.environ.get("GQL_MEMORY_BENCH_BEFORE")
    sides: dict[str, dict[str, list[float]]] = {}
    exports: list[int] = []
    with otlp_sink(exports) as endpoint:
        modes: list[tuple[str, dict[str, str], str | None]] = [
            ("off", {}, None),
            ("on", {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}, None),
        ]
        if before:
            modes.insert(0, ("before", {}, str(Path(before).resolve())))
        if sides_wanted := os.environ.get("GQL_MEMORY_BENCH_SIDES"):  # e.g. "before,off"
            modes = [m for m in modes if m[0] in sides_wanted.split(",")]
        for round_ in range(ROUNDS):
            # in turns, each round starting with another side: a drift of the machine, or
            # what the previous server leaves running as it stops, hits every side alike
            for name, env, cwd in modes[round_ % len(modes) :] + modes[: round_ % len(modes)]:
                for operation, values in measure(env, cwd).items():
                    sides.setdefault(name, {}).setdefault(operation, []).extend(values)
    lines = [
        "## Tracing overhead (bench/tracing.py)",
        "",
        f"{ROUNDS} rounds of {REQUESTS} requests per operation and side (after {WARMUP} "
        "warm-up pairs), one at a time over HTTP keep-alive, a fresh `gql-memory serve` "
        "(1 worker, hash embedder) per round and side. On: every span exported over "
        "OTLP/HTTP to a receiver on 127.0.0.1 (the default sampler: all of them; it received "
        f"{len(exports)} exports, {sum(exports) / 1e6:.1f} MB).",
        "",
        "| operation | side | p50 ms | mean ms | p99 ms | p50 / off | server CPU ms per "
        "request | CPU / off |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for operation in ("addWorkingMemory", "search"):
        off = percentile(sides["off"][operation], 50)
        off_cpu = statistics.fmean(sides["off"][f"{operation} cpu"])
        for name, _, _ in modes:
            values = sides[name][operation]
            p50 = percentile(values, 50)
            cpu = statistics.fmean(sides[name][f"{operation} cpu"])
            lines.append(
                f"| {operation} | {name} | {p50 * 1000:.2f} | "
                f"{statistics.fmean(values) * 1000:.2f} | {percentile(values, 99) * 1000:.2f} | "
                f"{p50 / off:.2f}x | {cpu * 1000:.2f} | {cpu / off_cpu:.2f}x |"
            )
    lines.append("")
    return lines


if __name__ == "__main__":
    print("\n".join(main()))
