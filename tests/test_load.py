"""A bounded load test: `serve --workers 2`, API keys required, many clients, mixed workload.

Zero errors, and the working-memory invariants hold across both worker processes: for every
session, working + stale == adds and working == min(adds, capacity). A fixed number of
requests, not a duration: the same work on a fast or a busy machine. The longer version, which
measures the rate, is bench/load.py (results in docs/benchmarks-security.md).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

from sqlalchemy import text

from gql_memory.db import Database
from tests.mixed_workload import Load, seed_stable
from tests.processes import GQL_MEMORY, ServeProcess, embedded_url, stop_embedded_leftovers

CLIENTS = 32
REQUESTS_PER_CLIENT = 30
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
        # the workload bench/load.py measures, a fixed number of requests per client
        load = Load(serve.base_url, key, await seed_stable(serve.base_url, key))
        await load.run_requests(CLIENTS, REQUESTS_PER_CLIENT)
        assert load.errors == [], load.errors[:5]
        assert load.requests == CLIENTS * REQUESTS_PER_CLIENT

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
        assert len(access) >= load.requests and all(json.loads(a)["request_id"] for a in access)
    finally:
        serve.stop()
        stop_embedded_leftovers(data_dir)
