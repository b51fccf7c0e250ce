"""Reliability with real processes: database outage, SIGKILL of server or database, SIGTERM.

Each test runs its own PostgreSQL (a `serve` process's embedded one, or a dedicated embedded
server) in a temporary directory, so killing things never touches the suite's database.

The tests assert outcomes (error codes, rows that survived, a clean stop), never durations:
how fast requests fail and how long restarts and recoveries take is measured by
bench/load.py ("Failure and recovery" in docs/benchmarks-security.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
from sqlalchemy import text

from gql_memory.config import DEFAULT_DATABASE_ROLE, Settings
from gql_memory.db import Database
from gql_memory.db.embedded import start_embedded
from gql_memory.server.app import create_app
from tests.conftest import start_live_server
from tests.processes import (
    ServeProcess,
    embedded_url,
    graphql,
    postmaster_pid,
    process_alive,
    stop_embedded_leftovers,
    wait_until,
)

STORE = (
    "mutation($s: String!, $c: String!) { storeRawDialogue(input: {sessionId: $s, "
    'speaker: "user", content: $c}) { id } }'
)
ADD = (
    "mutation($s: String!, $c: String!) { addWorkingMemory(input: {content: $c, sessionId: $s}) "
    "{ addedId } }"
)
COUNT = "{ stats { rawDialogue workingMemory staleMemory } }"


# --- database outage ----------------------------------------------------------------------------


async def test_database_outage_fails_fast_reports_unready_and_recovers(scratch_dir: Path) -> None:
    pg = await asyncio.to_thread(start_embedded, scratch_dir / "pg")
    # Failing fast means waiting for no timeout: these are far beyond the client's (30 s), so
    # a request that waited for one would fail the test with a client timeout, not an answer.
    patient = Settings(
        database_url=pg.url, db_connect_timeout_s=120, db_pool_timeout_s=300, request_timeout_s=0
    )
    server, task, base_url = await start_live_server(create_app(patient))
    try:
        async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
            assert "errors" not in await graphql(client, STORE, {"s": "s", "c": "before"})
            await asyncio.to_thread(pg.stop)

            for query, variables in ((COUNT, None), (STORE, {"s": "s", "c": "during"})):
                body = await graphql(client, query, variables)
                assert [e["extensions"]["code"] for e in body["errors"]] == ["SERVICE_UNAVAILABLE"]
                assert body["errors"][0]["message"] == "The database is unavailable; try again."
            ready = await client.get("/readyz")
            assert ready.status_code == 503 and ready.json()["database"] == "unreachable"
            assert (await client.get("/healthz")).status_code == 200  # alive, just not ready

            pg = await asyncio.to_thread(start_embedded, scratch_dir / "pg")

            async def answers() -> bool:
                return "errors" not in await graphql(client, COUNT)

            await wait_until(answers)  # without a restart of the server
            assert (await graphql(client, COUNT))["data"]["stats"]["rawDialogue"] == 1
            assert (await client.get("/readyz")).status_code == 200
    finally:
        server.should_exit = True
        await task
        await asyncio.to_thread(pg.stop)


async def test_frozen_database_fails_requests_within_the_timeouts(scratch_dir: Path) -> None:
    """A database that stops answering (SIGSTOP: a hung host, a partition) cannot hang us."""
    pg = await asyncio.to_thread(start_embedded, scratch_dir / "pg")
    settings = Settings(database_url=pg.url, statement_timeout_ms=300, db_connect_timeout_s=1)
    server, task, base_url = await start_live_server(create_app(settings))
    frozen: list[psutil.Process] = []
    try:
        async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
            assert "errors" not in await graphql(client, COUNT)  # a pooled connection exists
            postmaster = psutil.Process(postmaster_pid(scratch_dir / "pg"))
            frozen = [postmaster, *postmaster.children(recursive=True)]
            for process in frozen:
                process.suspend()
            for _ in range(2):  # the pooled connection (command timeout), then a new one
                # a frozen database never answers: only the statement and connect timeouts
                # can (a hang fails on the client's timeout, 30 s)
                body = await graphql(client, COUNT)
                assert body["errors"][0]["extensions"]["code"] == "SERVICE_UNAVAILABLE"
            for process in frozen:
                process.resume()
            frozen = []

            async def answers() -> bool:
                return "errors" not in await graphql(client, COUNT)

            await wait_until(answers)
    finally:
        for process in frozen:
            process.resume()
        server.should_exit = True
        await task
        await asyncio.to_thread(pg.stop)


# --- crash safety -------------------------------------------------------------------------------


@dataclass
class WriteLoad:
    """Clients storing turns and adding working memory until stopped; counts what was acked."""

    base_url: str
    clients: int = 12
    acked_turns: set[str] = field(default_factory=set)
    acked_adds: Counter[str] = field(default_factory=Counter)
    attempted_adds: Counter[str] = field(default_factory=Counter)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def run_client(self, number: int) -> None:
        session = f"load-{number}"
        async with httpx.AsyncClient(base_url=self.base_url, timeout=10) as client:
            for sequence in range(1_000_000):
                if self.stop.is_set():
                    return
                content = f"w{number}-{sequence}"
                add = sequence % 2 == 1
                if add:
                    self.attempted_adds[session] += 1
                try:
                    body = await graphql(
                        client, ADD if add else STORE, {"s": session, "c": content}
                    )
                except (httpx.HTTPError, ValueError):
                    await asyncio.sleep(0.02)  # the server is gone: not acknowledged
                    continue
                if body.get("data") and not body.get("errors"):
                    if add:
                        self.acked_adds[session] += 1
                    else:
                        self.acked_turns.add(content)

    async def until_acknowledged(self, writes: int) -> None:
        """Let the load run until this many writes were acknowledged (mid-load from then on)."""

        async def acknowledged() -> bool:
            return len(self.acked_turns) + sum(self.acked_adds.values()) >= writes

        await wait_until(acknowledged, interval=0.02, message="the load did not get going")

    def start(self) -> asyncio.Future[list[None]]:
        return asyncio.gather(*(self.run_client(i) for i in range(self.clients)))


async def server_logins(data_dir: Path) -> set[str]:
    """Who the serving process is logged in as (its pool and its LISTEN connection): on the
    embedded database, the row-level security role itself, never the superuser."""
    db = Database.from_url(embedded_url(data_dir))
    try:
        async with db.read() as conn:
            found = await conn.execute(
                text(
                    "SELECT DISTINCT usename FROM pg_stat_activity "
                    "WHERE application_name LIKE 'gql-memory%' AND pid <> pg_backend_pid()"
                )
            )
            return set(found.scalars())
    finally:
        await db.dispose()


async def assert_acknowledged_writes_survived(data_dir: Path, loads: list[WriteLoad]) -> None:
    db = Database.from_url(embedded_url(data_dir))
    try:
        async with db.read() as conn:
            stored = set((await conn.execute(text("SELECT content FROM raw_dialogue"))).scalars())
            per_session = dict(
                (
                    await conn.execute(
                        text(
                            "SELECT session_id, sum(n) FROM (SELECT session_id, count(*) n FROM "
                            "working_memory GROUP BY 1 UNION ALL SELECT session_id, count(*) "
                            "FROM stale_memory GROUP BY 1) x GROUP BY 1"
                        )
                    )
                ).all()
            )
    finally:
        await db.dispose()
    acked_turns = set().union(*(load.acked_turns for load in loads))
    assert acked_turns and not acked_turns - stored, f"lost {len(acked_turns - stored)} turns"
    for session in set().union(*(load.attempted_adds for load in loads)):
        acked = sum(load.acked_adds[session] for load in loads)
        attempted = sum(load.attempted_adds[session] for load in loads)
        assert acked <= per_session.get(session, 0) <= attempted, session


async def test_sigkill_of_the_server_loses_no_acknowledged_write(scratch_dir: Path) -> None:
    data_dir = scratch_dir / "data"
    serve = ServeProcess(data_dir).start()
    try:
        load = WriteLoad(serve.base_url)
        running = load.start()
        await load.until_acknowledged(200)
        serve.signal(signal.SIGKILL)
        await asyncio.to_thread(serve.wait)
        load.stop.set()  # the clients' requests in flight fail: not acknowledged
        await running

        restarted = ServeProcess(data_dir).start()  # attaches to the still-running database
        try:
            await assert_acknowledged_writes_survived(data_dir, [load])
            assert await server_logins(data_dir) == {DEFAULT_DATABASE_ROLE}
        finally:
            restarted.stop()
        print(f"{len(load.acked_turns)} turns acknowledged before the SIGKILL")
        assert postmaster_pid(data_dir) is None, "the database was not stopped cleanly"
    finally:
        serve.stop()
        stop_embedded_leftovers(data_dir)


async def test_killed_database_is_recovered_on_the_next_start(scratch_dir: Path) -> None:
    data_dir = scratch_dir / "data"
    serve = ServeProcess(data_dir).start()
    try:
        load = WriteLoad(serve.base_url)
        running = load.start()
        await load.until_acknowledged(200)
        postmaster = psutil.Process(postmaster_pid(data_dir))
        for process in [postmaster, *postmaster.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess, ProcessLookupError):
                process.kill()  # like the OOM killer, or a power cut for the database alone
        async with httpx.AsyncClient(base_url=serve.base_url, timeout=30) as client:
            body = await graphql(client, COUNT)
            assert body["errors"][0]["extensions"]["code"] == "SERVICE_UNAVAILABLE"
        load.stop.set()
        await running
        serve.stop()
        assert serve.wait() == 0, serve.log()[-3000:]

        recovered = ServeProcess(data_dir).start()  # crash recovery of the embedded database
        try:
            await assert_acknowledged_writes_survived(data_dir, [load])
        finally:
            recovered.stop()
        print(f"{len(load.acked_turns)} turns acknowledged before the database was killed")
        assert postmaster_pid(data_dir) is None
    finally:
        serve.stop()
        stop_embedded_leftovers(data_dir)


# --- graceful shutdown --------------------------------------------------------------------------


async def until_waiting_on_the_lock(db: Database) -> None:
    """Returns once a statement of another session waits on an advisory lock."""

    async def a_statement_waits() -> bool:
        async with db.read() as conn:
            waiting = await conn.scalar(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
                    "AND wait_event_type = 'Lock' AND wait_event = 'advisory'"
                )
            )
            return bool(waiting)

    await wait_until(a_statement_waits, message="the request never reached the held lock")


async def test_sigterm_drains_in_flight_requests_and_stops_the_database(scratch_dir: Path) -> None:
    data_dir = scratch_dir / "data"
    serve = ServeProcess(data_dir).start()
    try:
        blocker = Database.from_url(embedded_url(data_dir))
        async with httpx.AsyncClient(base_url=serve.base_url, timeout=30) as client:
            async with blocker.write() as conn:
                # Hold the session's lock: the add below waits for it, in flight.
                await conn.execute(
                    text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))"),
                    {"k": "wm\x1fdefault\x1fdrain"},
                )
                in_flight = asyncio.create_task(
                    graphql(client, ADD, {"s": "drain", "c": "finished while stopping"})
                )
                await until_waiting_on_the_lock(blocker)
                assert not in_flight.done()
                serve.signal(signal.SIGTERM)
                # uvicorn has stopped accepting and waits for the in-flight request
                await serve.until_logged("Waiting for connections to close")
                assert serve.process is not None and serve.process.poll() is None  # draining
                assert not in_flight.done()
            body = await asyncio.wait_for(in_flight, 60)  # the lock is released: it completes
        await blocker.dispose()
        assert body.get("data", {}).get("addWorkingMemory", {}).get("addedId"), body
        assert await asyncio.to_thread(serve.wait, 30) == 0
        assert postmaster_pid(data_dir) is None, "the embedded database was not stopped"
        log = (data_dir / "pgdata" / "log").read_text()
        assert log.rstrip().endswith("database system is shut down")
    finally:
        serve.stop()
        stop_embedded_leftovers(data_dir)


def test_no_server_process_is_left_behind() -> None:
    """A guard for the tests above: every serve they started has exited."""
    children = psutil.Process(os.getpid()).children(recursive=True)
    assert not [p for p in children if process_alive(p.pid) and "serve" in p.cmdline()]
