"""What OpenTelemetry tracing costs: addWorkingMemory and search over HTTP with tracing off
(no OTEL_* variables: no hook installed) and on (every span exported over OTLP/HTTP to a
receiver on 127.0.0.1 that discards them), the same requests on fresh servers in turns.

``GQL_MEMORY_BENCH_BEFORE=<checkout>`` adds a third side: the server of another checkout
(e.g. a worktree of the commit before tracing), run as it is, to show that off costs what the
code without tracing cost.

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

from bench.common import percentile, server

WARMUP = 200
REQUESTS = 1500
ROUNDS = 2
ENV = {"GQL_MEMORY_EMBEDDING_PROVIDER": "hash", "GQL_MEMORY_LOG_LEVEL": "WARNING"}
ADD = (
    "mutation Add($c: String!, $s: String!) "
    "{ addWorkingMemory(input: {content: $c, sessionId: $s}) { currentCount } }"
)
SEARCH = "query Find($q: String!) { search(query: $q, topK: 5) { id } }"


@contextmanager
def otlp_sink() -> Iterator[str]:
    """An OTLP/HTTP endpoint on 127.0.0.1 that accepts and discards every export."""

    class Sink(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers["Content-Length"]))
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


def measure(env: dict[str, str], cwd: str | None = None) -> dict[str, list[float]]:
    """Latencies (s) of addWorkingMemory and search, one request at a time."""
    before = os.getcwd()
    if cwd:
        os.chdir(cwd)  # `python -m gql_memory` imports the package of the working directory
    try:
        with server(**ENV, **env) as process, httpx.Client(base_url=process.url) as client:
            for i in range(WARMUP):
                timed(client, ADD, {"c": f"warm-up note {i} about tea", "s": f"s{i % 20}"})
                timed(client, SEARCH, {"q": f"note {i} tea"})
            add = [
                timed(client, ADD, {"c": f"note {i} about green tea", "s": f"s{i % 20}"})
                for i in range(REQUESTS)
            ]
            search = [timed(client, SEARCH, {"q": f"green tea note {i}"}) for i in range(REQUESTS)]
    finally:
        os.chdir(before)
    return {"addWorkingMemory": add, "search": search}


def main() -> list[str]:
    before = os.environ.get("GQL_MEMORY_BENCH_BEFORE")
    sides: dict[str, dict[str, list[float]]] = {}
    with otlp_sink() as endpoint:
        modes: list[tuple[str, dict[str, str], str | None]] = [
            ("off", {}, None),
            ("on", {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}, None),
        ]
        if before:
            modes.insert(0, ("before", {}, str(Path(before).resolve())))
        for _ in range(ROUNDS):  # in turns, so that a drift of the machine hits every side
            for name, env, cwd in modes:
                for operation, values in measure(env, cwd).items():
                    sides.setdefault(name, {}).setdefault(operation, []).extend(values)
    lines = [
        "## Tracing overhead (bench/tracing.py)",
        "",
        f"{ROUNDS} rounds of {REQUESTS} requests per operation and side (after {WARMUP} "
        "warm-up pairs), one at a time over HTTP keep-alive, a fresh `gql-memory serve` "
        "(1 worker, hash embedder) per round and side. On: every span exported over "
        "OTLP/HTTP to a receiver on 127.0.0.1 (the default sampler: all of them).",
        "",
        "| operation | side | p50 ms | mean ms | p99 ms | p50 / off |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for operation in ("addWorkingMemory", "search"):
        off = percentile(sides["off"][operation], 50)
        for name, _, _ in modes:
            values = sides[name][operation]
            p50 = percentile(values, 50)
            lines.append(
                f"| {operation} | {name} | {p50 * 1000:.2f} | "
                f"{statistics.fmean(values) * 1000:.2f} | {percentile(values, 99) * 1000:.2f} | "
                f"{p50 / off:.2f}x |"
            )
    lines.append("")
    return lines


if __name__ == "__main__":
    print("\n".join(main()))
