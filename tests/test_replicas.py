"""Read replicas with a real hot standby on loopback (tests/replica.py): no Docker, no mock.

One dedicated primary and its streaming standby for the whole module; the suite's shared
server is never stopped. Proven here: queries read on the replica and mutations write on the
primary; a read sent back with a mutation's extensions.lsn sees that mutation (1,000
trials); a library store reads its own writes with nothing passed around; a lagging or
stopped replica is skipped, counted, and no client sees an error; with the primary stopped,
queries still answer, writes fail fast with a retryable SERVICE_UNAVAILABLE, /readyz says
read-only, and writes succeed again once the primary is back, without a restart.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest
import pytest_asyncio
from sqlalchemy import event, text

from gql_memory.config import DEFAULT_DATABASE_ROLE, Settings
from gql_memory.db import Database
from gql_memory.db.fair import FairShare, NamespacedDatabase
from gql_memory.db.health import server_name
from gql_memory.db.positions import ReadSession, format_lsn, parse_lsn
from gql_memory.db.replicas import ReadReplicas
from gql_memory.errors import ServiceUnavailableError
from gql_memory.memory import Memory
from gql_memory.server.app import create_app
from gql_memory.store import AsyncMemoryStore
from tests.conftest import LiveServer, private_temp_dir, serving
from tests.live import GraphQLWS, wait_for_subscriptions
from tests.processes import wait_until
from tests.replica import ReplicaPair, remove, start_pair

ADD = """
mutation($c: String!, $s: String!) {
  addWorkingMemory(input: {content: $c, sessionId: $s}) { addedId }
}
"""
WORKING = "query($s: String!) { workingMemory(sessionId: $s) { id content } }"
ADD_INSIGHT = "mutation($c: String!) { addInsight(input: {content: $c}) { id } }"
SEARCH = "query($q: String!) { search(query: $q, topK: 3) { id content } }"
CONTEXT = 'query($q: String!) { context(query: $q, sessionId: "outage") { text } }'
ADD_NODE = 'mutation($n: String!) { addNode(input: {label: "Tool", name: $n}) { id } }'
ADD_EDGE = """
mutation($a: ID!, $b: ID!) { addEdge(input: {relation: "USES", sourceId: $a, targetId: $b}) { id } }
"""
NEIGHBORS = "query($id: ID!) { neighbors(nodeId: $id) { node { name } } }"
TRIALS = 1000
CLIENTS = 8


@pytest.fixture(scope="module")
def pair() -> Iterator[ReplicaPair]:
    root = private_temp_dir()
    started = start_pair(root)
    yield started
    started.close()
    remove(root)


@pytest.fixture(scope="module")
def replica_settings(pair: ReplicaPair) -> Settings:
    return pair.settings(
        replica_check_interval_s=0.1,
        replica_max_lag_s=1.0,
        read_after_lsn_wait_s=0.3,
        db_connect_timeout_s=2,
    )


@pytest_asyncio.fixture(scope="module")
async def server(replica_settings: Settings) -> AsyncIterator[LiveServer]:
    async with serving(replica_settings) as live:
        yield live


@asynccontextmanager
async def replay_paused(pair: ReplicaPair) -> AsyncIterator[None]:
    """The standby keeps receiving WAL but applies none of it."""
    await pair.standby.fetchval("SELECT pg_wal_replay_pause()")
    try:
        yield
    finally:
        await pair.standby.fetchval("SELECT pg_wal_replay_resume()")


async def metric(live: LiveServer, name: str, **labels: str) -> float:
    """A sample of /metrics (0 when the series does not exist yet)."""
    body = (await live.client.get("/metrics")).text
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in body.splitlines():
        match = re.match(r"^(\w+)(?:\{(.*)\})? (\S+)$", line)
        if match and match.group(1) == name and (match.group(2) or "") == wanted:
            return float(match.group(3))
    return 0.0


def replica_label(pair: ReplicaPair) -> str:
    return server_name(pair.standby.url())


async def add(server: LiveServer, content: str, session: str = "s") -> tuple[str, str]:
    """(added id, commit position) of a working-memory add."""
    body = await server.graphql(ADD, {"c": content, "s": session})
    assert "errors" not in body, body
    return body["data"]["addWorkingMemory"]["addedId"], body["extensions"]["lsn"]


async def working_ids(server: LiveServer, session: str = "s", after: str | None = None) -> set[str]:
    headers = {"X-Read-After-LSN": after} if after else {}
    body = await server.graphql(WORKING, {"s": session}, headers=headers)
    assert "errors" not in body, body
    return {item["id"] for item in body["data"]["workingMemory"]}


# --- positions ------------------------------------------------------------------------------


def test_positions_read_and_print_as_postgresql_does() -> None:
    for value in ("0/0", "0/3000060", "16/B374D848", "FFFFFFFF/FFFFFFFF"):
        assert format_lsn(parse_lsn(value)) == value
    assert parse_lsn("1/0") > parse_lsn("0/FFFFFFFF")
    for bad in ("", "3000060", "0x1/0", "1_0/0", "0/123456789", "a/b/c", "-1/0"):
        with pytest.raises(ValueError):
            parse_lsn(bad)


# --- routing --------------------------------------------------------------------------------


async def test_queries_read_on_the_replica_and_mutations_report_their_position(
    server: LiveServer, pair: ReplicaPair
) -> None:
    before = await metric(server, "gql_memory_db_reads_total", server=replica_label(pair))
    async with replay_paused(pair):
        added, lsn = await add(server, "written while the standby does not replay")
        # without the position, the query reads what the standby has replayed: not the add
        assert added not in await working_ids(server)
        # with it, the standby cannot reach it in time and the primary answers
        assert added in await working_ids(server, after=lsn)
        assert await metric(server, "gql_memory_replica_fallbacks_total", reason="lsn_timeout")
    await wait_until(lambda: _sees(server, added))  # replayed: the replica has it
    assert await metric(server, "gql_memory_db_reads_total", server=replica_label(pair)) > before
    assert parse_lsn(lsn) <= parse_lsn(await pair.standby.fetchval(
        "SELECT pg_last_wal_replay_lsn()::text"))  # fmt: skip


async def _sees(server: LiveServer, item_id: str) -> bool:
    return item_id in await working_ids(server)


async def test_a_read_after_the_returned_position_always_sees_the_write(
    server: LiveServer, pair: ReplicaPair
) -> None:
    replica = replica_label(pair)
    reads_before = await metric(server, "gql_memory_db_reads_total", server=replica)
    missed: list[str] = []

    async def client(index: int) -> None:
        session = f"trial-{index}"
        for trial in range(TRIALS // CLIENTS):
            added, lsn = await add(server, f"trial {index}/{trial}", session)
            if added not in await working_ids(server, session, after=lsn):
                missed.append(added)

    await asyncio.gather(*(client(i) for i in range(CLIENTS)))
    assert not missed, f"{len(missed)} of {TRIALS} reads missed their own write"
    on_replica = await metric(server, "gql_memory_db_reads_total", server=replica) - reads_before
    waited = await metric(server, "gql_memory_replica_lsn_waits_total", server=replica)
    fallbacks = await metric(server, "gql_memory_replica_fallbacks_total", reason="lsn_timeout")
    print(f"{TRIALS} trials: {on_replica:.0f} reads on the replica, {waited:.0f} waited for "
          f"replay, {fallbacks:.0f} fell back to the primary")  # fmt: skip
    assert on_replica >= TRIALS / 2  # the replica served them, not the primary


async def test_a_lagging_replica_is_skipped_and_counted(
    server: LiveServer, pair: ReplicaPair
) -> None:
    async with replay_paused(pair):
        added, _ = await add(server, "written while the replica lags", "lag")
        lagging_before = await metric(
            server, "gql_memory_replica_fallbacks_total", reason="lagging"
        )

        async def primary_answers() -> bool:  # once the lag passes the bound (1 s here)
            return added in await working_ids(server, "lag")

        await wait_until(primary_answers)
        lag = await metric(server, "gql_memory_replica_lag_seconds", server=replica_label(pair))
        assert lag > 1.0
        assert (
            await metric(server, "gql_memory_replica_fallbacks_total", reason="lagging")
            > lagging_before
        )

    async def replica_serves_again() -> bool:
        reads = await metric(server, "gql_memory_db_reads_total", server=replica_label(pair))
        await working_ids(server, "lag")
        return await metric(server, "gql_memory_db_reads_total", server=replica_label(pair)) > reads

    await wait_until(replica_serves_again)


async def test_a_stopped_replica_is_skipped_without_errors(
    server: LiveServer, pair: ReplicaPair
) -> None:
    added, _ = await add(server, "before the replica stops", "down")
    await asyncio.to_thread(pair.standby.stop)
    try:
        unavailable = await metric(
            server, "gql_memory_replica_fallbacks_total", reason="unavailable"
        )
        for _ in range(5):  # the first read finds the connections closed, and moves on
            assert added in await working_ids(server, "down")
        assert (
            await metric(server, "gql_memory_replica_fallbacks_total", reason="unavailable")
            > unavailable
        )
        ready = await server.client.get("/readyz")
        assert ready.status_code == 200
        assert ready.json() == {
            "status": "ok",
            "database": "ok",
            "embedder": {"state": "ok"},
            "replicas": {"up": 0, "total": 1},
        }
    finally:
        await asyncio.to_thread(pair.standby.start)

    async def replica_up() -> bool:
        return (await server.client.get("/readyz")).json()["replicas"]["up"] == 1

    await wait_until(replica_up)


async def test_an_invalid_position_is_refused(server: LiveServer) -> None:
    body = await server.graphql(WORKING, {"s": "s"}, headers={"X-Read-After-LSN": "yesterday"})
    assert [e["extensions"]["code"] for e in body["errors"]] == ["BAD_USER_INPUT"]
    assert "x-read-after-lsn" in body["errors"][0]["message"].lower()


async def test_a_position_past_the_primarys_is_refused_without_waiting(
    server: LiveServer, pair: ReplicaPair
) -> None:
    """Every read of the request is refused at once: none waits for the replica (nor holds
    one of its connections) for a position no server has written."""
    waits = await metric(server, "gql_memory_replica_lsn_waits_total", server=replica_label(pair))
    body = await server.graphql(
        "{ stats { sessions } workingMemory { id } }",
        headers={"X-Read-After-LSN": "FFFFFFFF/FFFFFFFF"},
    )
    assert body["errors"] and {e["extensions"]["code"] for e in body["errors"]} == {
        "BAD_USER_INPUT"
    }
    assert "past the primary database's" in body["errors"][0]["message"]
    after = await metric(server, "gql_memory_replica_lsn_waits_total", server=replica_label(pair))
    assert after == waits
    _, lsn = await add(server, "a position the primary wrote is still served")
    assert await working_ids(server, after=lsn)


async def test_a_batch_reads_its_own_mutation(server: LiveServer, pair: ReplicaPair) -> None:
    async with replay_paused(pair):
        response = await server.client.post(
            "/graphql",
            json=[
                {"query": ADD, "variables": {"c": "batched", "s": "batch"}},
                {"query": WORKING, "variables": {"s": "batch"}},
            ],
        )
    added, listed = response.json()
    assert added["data"]["addWorkingMemory"]["addedId"] in {
        item["id"] for item in listed["data"]["workingMemory"]
    }


async def test_a_subscription_reads_the_state_its_event_announces(
    server: LiveServer, pair: ReplicaPair
) -> None:
    """An event comes from a commit on the primary; the replicas may not have it yet."""
    watch = (
        "subscription($s: String!) { workingMemoryChanged(sessionId: $s) "
        "{ event { itemId } items { id } } }"
    )
    async with GraphQLWS.connect(server.client, server.base_url) as ws:
        await ws.subscribe(watch, {"s": "watched"})
        await wait_for_subscriptions(server.client, server.base_url, "workingMemoryChanged")
        async with replay_paused(pair):
            added, _ = await add(server, "announced", "watched")
            change = (await ws.next_data())["workingMemoryChanged"]
    assert change["event"]["itemId"] == added
    assert added in {item["id"] for item in change["items"]}


# --- the library ----------------------------------------------------------------------------


async def test_a_store_reads_its_own_writes_with_nothing_passed_around(
    pair: ReplicaPair, replica_settings: Settings
) -> None:
    async with (
        AsyncMemoryStore(settings=replica_settings, namespace="lib") as store,
        AsyncMemoryStore(settings=replica_settings, namespace="lib") as other,
    ):
        assert store.memory.db.replicas is not None
        for trial in range(200):
            added = await store.working.add(f"library trial {trial}", session_id="lib")
            assert await store.working.get(added.added_id) is not None
        async with replay_paused(pair):
            added = await store.working.add("while the standby does not replay", session_id="lib")
            # the writer sees it (the replica cannot reach its position: the primary answers)
            assert await store.working.get(added.added_id) is not None
            # another store, which did not write it, reads what the replica has
            assert await other.working.get(added.added_id) is None


async def test_replica_reads_are_read_only_and_see_one_namespace(
    pair: ReplicaPair, replica_settings: Settings
) -> None:
    role = DEFAULT_DATABASE_ROLE
    primary = Database.from_url(pair.primary.url(), replica_settings, role=role)
    replicas = ReadReplicas.for_settings(replica_settings, primary.engine, role=role)
    db = primary.with_replicas(replicas, ReadSession())
    await replicas.start()
    share = FairShare(4)
    try:
        acme = NamespacedDatabase(db, "acme", share)
        await Memory(acme, replica_settings, "acme").working.add("acme's", session_id="rls")
        for namespace, expected in (("acme", 1), ("globex", 0)):
            async with NamespacedDatabase(db, namespace, share).read() as conn:
                assert await conn.scalar(text("SELECT pg_is_in_recovery()"))
                count = await conn.scalar(
                    text("SELECT count(*) FROM working_memory WHERE session_id = 'rls'")
                )
                assert count == expected
        with pytest.raises(Exception, match="read-only transaction"):
            async with acme.read() as conn:
                await conn.execute(text("CREATE TEMP TABLE scratch (x int)"))
    finally:
        await db.dispose()


async def test_a_busy_pool_never_makes_a_server_look_down(
    pair: ReplicaPair, replica_settings: Settings
) -> None:
    """The checks have connections of their own: requests holding every pooled connection
    must not make the primary look down (that would refuse every write)."""
    settings = replica_settings.with_overrides(
        db_pool_size=1, db_max_overflow=0, db_pool_timeout_s=0.2
    )
    primary = Database.from_url(pair.primary.url(), settings)
    replicas = ReadReplicas.for_settings(settings, primary.engine)
    db = primary.with_replicas(replicas)
    try:
        async with primary.engine.connect(), replicas.replicas[0].engine.connect():
            await replicas.check()
        assert replicas.primary_up and replicas.replicas[0].up
    finally:
        await db.dispose()


# --- a primary outage -----------------------------------------------------------------------


async def test_queries_survive_a_primary_outage_and_writes_recover_by_themselves(
    server: LiveServer, pair: ReplicaPair, replica_settings: Settings
) -> None:
    await add(server, "remember the outage drill", "outage")
    insight = await server.data(ADD_INSIGHT, {"c": "The outage drill runs on Fridays"})
    a = (await server.data(ADD_NODE, {"n": "pg_ctl"}))["addNode"]["id"]
    b = (await server.data(ADD_NODE, {"n": "pg_basebackup"}))["addNode"]["id"]
    await server.data(ADD_EDGE, {"a": a, "b": b})
    await wait_until(pair.caught_up)

    await asyncio.to_thread(pair.primary.stop)
    try:

        async def read_only() -> bool:
            ready = await server.client.get("/readyz")
            return ready.status_code == 200 and ready.json()["status"] == "read-only"

        await wait_until(read_only)

        async def refused_fast() -> bool:  # once a check has found the primary down
            body = await server.graphql(ADD, {"c": "during the outage", "s": "outage"})
            error = body["errors"][0]
            assert error["extensions"]["code"] == "SERVICE_UNAVAILABLE", error
            return "retryAfterMs" in error["extensions"]

        await wait_until(refused_fast)
        body = await server.graphql(ADD_INSIGHT, {"c": "not now"})
        assert body["data"] is None
        assert body["errors"][0]["extensions"]["code"] == "SERVICE_UNAVAILABLE"
        assert body["errors"][0]["extensions"]["retryAfterMs"] >= 1

        insight_id = insight["addInsight"]["id"]
        hits = (await server.data(SEARCH, {"q": "outage drill Fridays"}))["search"]
        assert insight_id in {hit["id"] for hit in hits}
        assert "outage drill" in (await server.data(CONTEXT, {"q": "outage drill"}))[
            "context"]["text"]  # fmt: skip
        assert [i["content"] for i in (await server.data(WORKING, {"s": "outage"}))[
            "workingMemory"]] == ["remember the outage drill"]  # fmt: skip
        neighbors = (await server.data(NEIGHBORS, {"id": a}))["neighbors"]
        assert [n["node"]["name"] for n in neighbors] == ["pg_basebackup"]

        # a server cannot start without its primary (migrations, LISTEN): it says so
        app = create_app(replica_settings)
        with pytest.raises(ServiceUnavailableError, match="database is unavailable"):
            async with app.router.lifespan_context(app):
                pass
    finally:
        await asyncio.to_thread(pair.primary.start)

    async def writes_again() -> bool:
        body = await server.graphql(ADD, {"c": "after the outage", "s": "outage"})
        return "errors" not in body

    await wait_until(writes_again)
    ready = await server.client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ok"


# --- without replicas -----------------------------------------------------------------------


async def test_without_replicas_nothing_is_added(api: LiveServer, settings: Settings) -> None:
    """No position in responses, no replica metrics, no extra statement on any path."""
    body = await api.graphql(ADD, {"c": "no replicas", "s": "plain"})
    assert "errors" not in body and "lsn" not in body.get("extensions", {})
    assert "errors" not in await api.graphql(WORKING, {"s": "plain"})
    samples = (await api.client.get("/metrics")).text
    assert not re.search(r"^gql_memory_(database_up|db_reads|replica_\w+)\{", samples, re.M)
    assert (await api.client.get("/readyz")).json() == {
        "status": "ok",
        "database": "ok",
        "embedder": {"state": "ok"},
    }

    assert settings.database_url
    db = Database.from_url(settings.database_url, settings)
    sent: list[str] = []
    event.listen(
        db.engine.sync_engine,
        "connect",
        lambda conn, _: conn.driver_connection.add_query_logger(lambda q: sent.append(q.query)),
    )
    try:
        memory = Memory(db, settings, "plain")
        added = await memory.working.add("a statement", session_id="plain")  # autocommit
        await memory.insights.add("a transaction")  # a write transaction
        assert await memory.working.get(added.added_id) is not None  # a read
    finally:
        await db.dispose()
    assert sent and not [query for query in sent if "wal_" in query]
