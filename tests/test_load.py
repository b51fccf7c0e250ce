"""A bounded load test: `serve --workers 2`, API keys required, many clients, mixed workload.

Zero errors, and the working-memory invariants hold across both worker processes: for every
session, working + stale == adds and working == min(adds, capacity). The longer version is
bench/load.py (results in docs/benchmarks-security.md).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

from sqlalchemy import text

from bench.load import Load, seed_stable
from gql_memory.db import Database
from tests.processes import GQL_MEMORY, ServeProcess, embedded_url, stop_embedded_leftovers

CLIENTS = 32
DURATION_S = 3.0
CAPACITY = 10


def create_key(data_dir: Path) -> str:
    done = subprocess.run(
        [str(GQL_MEMORY), "keys", "create", "--namespace", "load", "--scopes", "read,write",
         "--data-dir", str(data_dir)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return done.stdout.strip().splitlines()[-1]


async def test_two_workers_many_clients_zero_errors_invariants_hold(scratch_dir: Path) -> None:
    data_dir = scratch_dir / "data"
    serve = ServeProcess(data_dir, workers=2, env={"GQL_MEMORY_AUTH": "required"}).start()
    try:
        key = await asyncio.to_thread(create_key, data_dir)  # while the server runs
        # the benchmark's own workload (bench/load.py), for a few seconds
        load = Load(serve.base_url, key, await seed_stable(serve.base_url, key))
        seconds = await load.run(CLIENTS, DURATION_S)
        requests = len(load.latencies) + len(load.errors)
        print(
            f"\n{requests} requests in {seconds:.1f}s = {requests / seconds:.0f}/s, "
            f"{CLIENTS} clients, 2 workers, {len(load.errors)} errors"
        )
        assert load.errors == [], load.errors[:5]
        assert requests > CLIENTS  # (the rate depends on the machine; see bench/load.py)

        db = Database.from_url(embedded_url(data_dir))
        try:
            async with db.read() as conn:
                counts = {
                    (row.table, row.session_id): row.n
                    for row in await conn.execute(
                        text(
                            "SELECT 'working' AS table, session_id, count(*) n FROM working_memory "
                            "WHERE namespace = 'load' GROUP BY session_id UNION ALL "
                            "SELECT 'stale', session_id, count(*) FROM stale_memory "
                            "WHERE namespace = 'load' GROUP BY session_id"
                        )
                    )
                }
        finally:
            await db.dispose()
        for session, adds in load.adds.items():
            working = counts.get(("working", session), 0)
            stale = counts.get(("stale", session), 0)
            assert working + stale == adds, session
            assert working == min(adds, CAPACITY), session
        assert counts[("working", "stable")] == 5 and ("stale", "stable") not in counts
        log = serve.log()
        assert key not in log
        access = [line for line in log.splitlines() if '"gql_memory.access"' in line]
        assert len(access) >= requests and all(json.loads(a)["request_id"] for a in access)
    finally:
        serve.stop()
        stop_embedded_leftovers(data_dir)
