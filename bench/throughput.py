"""Cold start to first answered query, and addWorkingMemory throughput (1 vs 16 clients)."""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

import httpx

from bench.common import server

ADD = (
    "mutation($c: String!, $s: String!) { addWorkingMemory(input: "
    "{content: $c, sessionId: $s}) { addedId currentCount } }"
)


async def run_clients(url: str, clients: int, per_client: int, sessions: int) -> float:
    """Requests per second for `clients` concurrent clients, each adding `per_client` items."""

    async def client(index: int, http: httpx.AsyncClient) -> None:
        for i in range(per_client):
            response = await http.post(
                "/graphql",
                json={
                    "query": ADD,
                    "variables": {"c": f"c{index}-{i}", "s": f"s{index % sessions}"},
                },
            )
            assert "errors" not in response.json(), response.text

    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as http:
        started = time.perf_counter()
        await asyncio.gather(*(client(i, http) for i in range(clients)))
        return clients * per_client / (time.perf_counter() - started)


def main() -> list[str]:
    lines = ["## Server: cold start and addWorkingMemory throughput", ""]
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        with server(data_dir=data_dir) as srv:
            first_start = srv.cold_start_s
        with server(data_dir=data_dir) as srv:
            warm_start = srv.cold_start_s
    lines.append(
        f"- cold start to first answered query, new data dir (initdb): {first_start:.2f} s"
    )
    lines.append(f"- cold start to first answered query, existing data dir: {warm_start:.2f} s")
    with server() as srv:
        asyncio.run(run_clients(srv.url, 4, 25, 4))  # warm-up
        one = asyncio.run(run_clients(srv.url, 1, 500, 1))
        sixteen_one_session = asyncio.run(run_clients(srv.url, 16, 125, 1))
        sixteen = asyncio.run(run_clients(srv.url, 16, 125, 16))
    lines += [
        f"- addWorkingMemory, 1 client: {one:.0f} requests/s",
        f"- addWorkingMemory, 16 concurrent clients, 16 sessions: {sixteen:.0f} requests/s",
        f"- addWorkingMemory, 16 concurrent clients, one session (serialized by the "
        f"session lock): {sixteen_one_session:.0f} requests/s",
        "",
    ]
    return lines


if __name__ == "__main__":
    print("\n".join(main()))
