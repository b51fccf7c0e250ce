"""Every statement the app runs over a full workload pins each tenant table it touches to one
namespace, so a tenant-sharding engine (Citus, distributed by namespace) routes it to the
shard of that namespace.

How the statements are captured: ``pg_stat_statements`` with ``pg_stat_statements.track =
all`` on a PostgreSQL server of this module's own. ``log_statement = 'all'`` was the other
candidate, but it logs only what clients send: the statements inside the SQL functions of
migrations 0010/0012 (the hot writes: adds, stored turns, sweeps, archiving) and the
foreign-key checks PostgreSQL runs for the keys of migration 0013 would go unseen.
pg_stat_statements records those too, nested, as written (constants normalised to $n, a
PL/pgSQL variable such as the namespace argument ``ns`` left as it is). The embedded
PostgreSQL ships the extension; it must be preloaded, which takes a server start, so this
module starts a server of its own (ALTER SYSTEM, restart) and the suite's server is left as
it is. Each distinct statement is checked once by its parse tree (tests/db/routing.py).
(PostgreSQL 18 identifies an aliased table by its alias when it groups statements, so two
statements that differ only in the table behind one alias, at the same column positions,
share one entry and one text: they have the same shape, so the same namespace predicates, and
checking the one checks the other.)

The workload runs through the real HTTP app (every GraphQL operation, with nested fields, so
the loaders' statements run too) and the library (transcript import, re-embedding, a second
namespace).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from sqlalchemy import text

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.embedded import EmbeddedPostgres, admin_url, start_embedded
from gql_memory.db.migrate import upgrade
from gql_memory.db.tables import TENANT_TABLES
from gql_memory.embeddings import make_provider
from gql_memory.embeddings.hashed import HashEmbedder
from gql_memory.memory import Memory
from gql_memory.memory.consolidation.schedule import ConsolidationWorker
from gql_memory.memory.embedding_config import reembed
from gql_memory.memory.importer import import_file
from tests.conftest import LiveServer, private_temp_dir, serving
from tests.db.routing import mentions_tenant_table, reads_every_namespace, unrouted

DATABASE = "routing"
UNSCOPED_PROBE = "SELECT count(*) AS probe_of_the_check FROM nodes"


@pytest.fixture(scope="module")
def tracked_pg() -> Iterator[EmbeddedPostgres]:
    """An embedded server of this module's own that records every statement, nested ones
    included."""
    root = private_temp_dir()
    server = start_embedded(root / "data", database=DATABASE)
    server.server.psql(
        "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements';"
        "ALTER SYSTEM SET pg_stat_statements.track = 'all';"
        "ALTER SYSTEM SET pg_stat_statements.max = 20000;"
    )
    server.stop()
    server = start_embedded(root / "data", database=DATABASE)
    yield server
    server.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def tracked_settings(tracked_pg: EmbeddedPostgres) -> Settings:
    return Settings(
        database_url=admin_url(tracked_pg.server, DATABASE),
        working_memory_capacity=3,
        decay_delete_threshold=0.2,  # low-importance items decay within a few events
        dashboard=False,  # no browser here
    )


async def _statements(db: Database) -> list[str]:
    async with db.read() as conn:
        found = await conn.execute(
            text(
                "SELECT query FROM pg_stat_statements WHERE dbid = "
                "(SELECT oid FROM pg_database WHERE datname = current_database())"
            )
        )
        return sorted(set(found.scalars()))


@pytest_asyncio.fixture(scope="module")
async def captured(tracked_settings: Settings) -> AsyncIterator[list[str]]:
    """The distinct statements of the workload (the migration's excluded)."""
    assert tracked_settings.database_url
    db = Database.from_url(tracked_settings.database_url, tracked_settings)
    await upgrade(db, tracked_settings.hash_embedding_dim)
    async with db.write() as conn:
        await conn.execute(text("CREATE EXTENSION IF NOT EXISTS pg_stat_statements"))
        await conn.execute(text("SELECT pg_stat_statements_reset()"))
    root = private_temp_dir()
    try:
        async with serving(tracked_settings) as api:
            await _http_workload(api)
        await _library_workload(db, tracked_settings, root)
        async with db.read() as conn:
            await conn.execute(text(UNSCOPED_PROBE))
        yield await _statements(db)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        await db.dispose()


# --- the workload ---------------------------------------------------------------------------

FRAGMENTS = {
    "Wm": "fragment Wm on WorkingMemoryResult { addedId evictedId archivedId currentCount "
    "decayedIds }",
    "Ins": "fragment Ins on Insight { id content sourceIds validFrom validTo supersededBy "
    "supersedes sources { id content } possiblyContradicts { similarity insight { id } } }",
    "Edg": "fragment Edg on Edge { id sourceId targetId relation validTo supersededBy "
    "supersedes source { id } target { id } }",
    "Nod": "fragment Nod on Node { id label name insight { id } episode { id } "
    "rawDialogue { id } edges { ...Edg } }",
    "Hit": "fragment Hit on SearchHit { layer id content finalScore graphBoost sessionBoost "
    "causalBoost filteredNow graphSource { layer id } insight { id supersedes } "
    "episode { id } rawDialogue { id } }",
}


def _document(operation: str) -> str:
    """The operation with the fragments it spreads, and theirs."""
    used: list[str] = []
    pending = [operation]
    while pending:
        for name in re.findall(r"\.\.\.(\w+)", pending.pop()):
            if name not in used:
                used.append(name)
                pending.append(FRAGMENTS[name])
    return " ".join([operation, *(FRAGMENTS[name] for name in used)])


async def _http_workload(api: LiveServer) -> None:
    """Every GraphQL operation, with nested fields, through the real app."""

    async def d(operation: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        return await api.data(_document(operation), variables)

    turns = await d(
        "mutation($in: [RawDialogueInput!]!) { storeRawDialogueBatch(input: $in) { id } }",
        {
            "in": [
                {"sessionId": "s1", "speaker": "Maria", "content": "Maria met Tom in Lisbon."},
                {"sessionId": "s1", "speaker": "Tom", "content": "We walked along the Tagus."},
                {"sessionId": "s2", "speaker": "user", "content": "Book a table in Porto."},
            ]
        },
    )
    raw_ids = [t["id"] for t in turns["storeRawDialogueBatch"]]
    one = await d(
        "mutation($in: RawDialogueInput!) { storeRawDialogue(input: $in) { id } }",
        {
            "in": {
                "sessionId": "s1",
                "speaker": "Maria",
                "content": "Tom loves sardines.",
                "timestamp": "2026-01-02T10:00:00Z",
            }
        },
    )
    raw_ids.append(one["storeRawDialogue"]["id"])

    add_insight = "mutation($in: InsightInput!) { addInsight(input: $in) { ...Ins } }"
    first = await d(
        add_insight, {"in": {"content": "Maria lives in Lisbon", "sourceIds": raw_ids[:2]}}
    )
    second = await d(
        add_insight,
        {"in": {"content": "Maria moved to Porto", "supersedes": [first["addInsight"]["id"]]}},
    )
    insight = second["addInsight"]["id"]
    spare = await d(add_insight, {"in": {"content": "Tom likes fado"}})
    await d(
        "mutation($id: ID!) { invalidateInsight(id: $id) { id validTo } }",
        {"id": spare["addInsight"]["id"]},
    )
    store_episode = "mutation($in: EpisodeInput!) { storeEpisode(input: $in) { id supersedes } }"
    trip = {"query": "plan a trip", "reward": 0.5, "reflection": "book early"}
    episode = (await d(store_episode, {"in": trip}))["storeEpisode"]["id"]
    newer = {**trip, "reward": 0.9, "reflection": "book earlier", "supersedes": [episode]}
    newer_episode = (await d(store_episode, {"in": newer}))["storeEpisode"]["id"]

    add = "mutation($in: WorkingMemoryInput!) { addWorkingMemory(input: $in) { ...Wm } }"
    for n, importance in enumerate((0.9, 0.25, 0.5, 0.5, 0.25, 0.5)):
        ref = {"refKind": "INSIGHT", "refId": insight} if n == 0 else {}
        item = {"content": f"note {n}", "importance": importance, "sessionId": "s1", **ref}
        await d(add, {"in": item})
    items = (await d('{ workingMemory(sessionId: "s1") { id refKind } }'))["workingMemory"]
    item_id = {"id": items[0]["id"]}
    await d("mutation($id: ID!) { accessWorkingMemory(id: $id) { id } }", item_id)
    await d("query($id: ID!) { workingMemoryItem(id: $id) { id attention } }", item_id)
    archived = await d(
        "mutation($id: ID!) { archiveWorkingMemory(id: $id) { id } }", {"id": items[-1]["id"]}
    )
    await d(
        "mutation($id: ID!) { restoreStaleMemory(id: $id) { ...Wm } }",
        {"id": archived["archiveWorkingMemory"]["id"]},
    )
    await d(
        '{ staleMemory(sessionId: "s1", importanceMin: 0.1, reason: LRU_EVICTION, first: 2) '
        "{ edges { cursor node { id refKind } } pageInfo { hasNextPage endCursor } } }"
    )
    await d(
        '{ rawDialogue(sessionId: "s1", speaker: "Maria", from: "2020-01-01T00:00:00Z", '
        "first: 1) { edges { cursor node { id } } pageInfo { endCursor } } }"
    )
    await d(
        "mutation($in: ToolOutputInput!) { ingestToolOutput(input: $in) { stored reason } }",
        {"in": {"toolName": "Bash", "output": "ok\nPASSED 3", "sessionId": "s1"}},
    )

    add_node = "mutation($in: NodeInput!) { addNode(input: $in) { id } }"
    person = {"label": "Person", "name": "Maria", "insightId": insight, "rawId": raw_ids[0]}
    maria = (await d(add_node, {"in": person}))["addNode"]["id"]
    plan = {"label": "Trip", "name": "Porto", "episodeId": newer_episode}
    trip_node = (await d(add_node, {"in": plan}))["addNode"]["id"]
    add_edge = "mutation($in: EdgeInput!) { addEdge(input: $in) { ...Edg } }"
    lives = {"sourceId": maria, "relation": "LIVES_IN", "createMissing": True}
    lisbon = await d(add_edge, {"in": {**lives, "target": {"label": "City", "name": "Lisbon"}}})
    moved = {**lives, "target": {"label": "City", "name": "Porto"}}
    await d(add_edge, {"in": {**moved, "supersedes": [lisbon["addEdge"]["id"]]}})
    planned = {"sourceId": maria, "targetId": trip_node, "relation": "PLANNED"}
    went = (await d(add_edge, {"in": {**planned, "weight": 2}}))["addEdge"]["id"]
    await d("mutation($id: ID!) { invalidateEdge(id: $id) { id validTo } }", {"id": went})
    await d(add_edge, {"in": planned})
    await d(
        "query($s: ID!, $w: ID!, $n: ID!) { insight(id: $s) { ...Ins } "
        "episode(id: $w) { id supersedes } node(id: $n) { ...Nod } }",
        {"s": insight, "w": newer_episode, "n": maria},
    )
    await d(
        "{ insights(includeSuperseded: true, first: 2) { edges { cursor node { id supersedes } } "
        'pageInfo { endCursor } } insightSearch(query: "where does Maria live", topK: 3, '
        'asOf: "2026-01-01T00:00:00Z") { score insight { id } } '
        'similarEpisodes(query: "plan a trip", minSimilarity: 0) { similarity episode { id } } '
        'nodes(label: "City", first: 1) { edges { cursor node { ...Nod } } } '
        'nodeByName(label: "Person", name: "Maria") { ...Nod } '
        "stats { rawDialogue workingMemory staleMemory insights episodes nodes edges sessions } }"
    )
    now = datetime.now(UTC).isoformat()
    neighbors = (
        "query($n: ID!, $depth: Int!, $r: String, $dir: Direction!, $at: DateTime) { "
        "neighbors(nodeId: $n, depth: $depth, relation: $r, direction: $dir, asOf: $at) "
        "{ distance node { ...Nod } path { id } edges { id } } }"
    )
    for depth, relation, direction, at in (
        (2, None, "BOTH", None),
        (3, None, "OUT", None),
        (2, "LIVES_IN", "IN", None),
        (2, None, "BOTH", now),
    ):
        variables = {"n": maria, "depth": depth, "r": relation, "dir": direction, "at": at}
        await d(neighbors, variables)
    path = (
        "query($a: ID!, $b: ID!, $at: DateTime) { path(fromId: $a, toId: $b, asOf: $at) "
        "{ length nodes { id } edges { id } } }"
    )
    for at in (None, now):
        await d(path, {"a": trip_node, "b": maria, "at": at})
    search = (
        "query($layers: [MemoryLayer!]!, $fusion: Fusion, $w: SearchWeights, $at: DateTime, "
        '$since: DateTime, $until: DateTime) { search(query: "Maria Lisbon Porto", '
        'sessionId: "s1", layers: $layers, fusion: $fusion, weights: $w, asOf: $at, '
        "since: $since, until: $until) { ...Hit } }"
    )
    every_layer = ["INSIGHT", "EPISODE", "RAW"]
    for variables in (
        {"layers": every_layer},
        {"layers": ["INSIGHT", "RAW"], "fusion": "RRF", "w": {"vector": 0.7, "text": 0.3}},
        {"layers": every_layer, "at": now, "since": "2020-01-01T00:00:00Z", "until": now},
    ):
        await d(search, variables)
    context = (
        'query($at: DateTime) { context(query: "where does Maria live", sessionId: "s1", '
        "asOf: $at) { totalTokens notes sections { kind items { kind id } } } }"
    )
    for at in (None, now):
        await d(context, {"at": at})

    await d('mutation { clearWorkingMemory(sessionId: "s1") }')
    await d("mutation($id: ID!) { deleteInsight(id: $id) }", {"id": insight})
    await d("mutation($id: ID!) { deleteEpisode(id: $id) }", {"id": newer_episode})
    await d("mutation($id: ID!) { deleteNode(id: $id) }", {"id": trip_node})
    await d('mutation { forgetSession(sessionId: "s1") }')


async def _library_workload(db: Database, settings: Settings, root: Path) -> None:
    """What only the library and the operator's commands do, and a second namespace."""
    await library_writes(db, settings, root)
    await reembed(db, HashEmbedder(16), batch_size=2)
    # the scheduled consolidation: its look for due namespaces reads every namespace (an
    # operator's statement), each pass and cursor is one namespace's
    await ConsolidationWorker(
        db, make_provider(settings), settings.with_overrides(consolidation_interval_s=60)
    ).run_once()


async def library_writes(db: Database, settings: Settings, root: Path) -> None:
    """The library's writes in the second namespace ("tenant_b"): a turn, a working item, a
    transcript imported twice, an insight and its duplicate consolidated and undone
    (tests/citus runs them on the cluster)."""
    other = Memory(db, settings, "tenant_b")
    await other.raw.store("t", "Ana", "Ana flies to Madrid.")
    await other.working.add("remember Madrid", session_id="t")
    transcript = root / "chat.jsonl"
    transcript.write_text(
        '{"session_id": "imp", "speaker": "user", "content": "Hello Ana"}\n'
        '{"session_id": "imp", "speaker": "Ana", "content": "Hi, Madrid is sunny"}\n'
    )
    await import_file(other.raw, transcript, batch_size=1)
    await import_file(other.raw, transcript)  # every turn already there: skipped
    await other.insights.add("Ana likes Madrid", [])
    await other.insights.add("Ana likes Madrid", [])  # a duplicate: consolidation merges it
    report = await other.consolidation.run()
    await other.consolidation.undo(report.actions[0].id)
    await other.consolidation.history()


# --- the checks -----------------------------------------------------------------------------


def _shown(problems: dict[str, list[str]]) -> str:
    return "\n\n".join(
        f"{' '.join(sql.split())}\n  -> {'; '.join(found)}" for sql, found in problems.items()
    )


def test_every_statement_of_the_workload_is_routed_to_one_namespace(captured: list[str]) -> None:
    problems = {
        sql: unrouted(sql)
        for sql in captured
        if UNSCOPED_PROBE not in sql and not reads_every_namespace(sql)
    }
    unroutable = {sql: found for sql, found in problems.items() if found}
    assert not unroutable, (
        f"{len(unroutable)} statement(s) touch a tenant table without pinning its namespace "
        f"(a tenant-sharding engine could not route them to one shard):\n\n{_shown(unroutable)}"
    )


def test_the_check_catches_an_unscoped_statement_run_on_the_server(
    captured: list[str],
) -> None:
    """The capture and the check together can fail: the probe the fixture ran is caught."""
    probes = [sql for sql in captured if UNSCOPED_PROBE in sql]
    assert len(probes) == 1
    assert unrouted(probes[0]) == ["nodes (nodes) is not pinned to one namespace"]


def test_the_workload_reaches_every_tenant_table_and_the_statements_inside_functions(
    captured: list[str],
) -> None:
    """Nothing passes vacuously: every tenant table is touched, the statements inside the SQL
    functions and PostgreSQL's foreign-key checks are among those checked."""
    for table in TENANT_TABLES:
        assert any(mentions_tenant_table(sql, [table]) for sql in captured), table
    assert any("w.namespace = ns" in sql for sql in captured)  # gql_memory_sweep's body
    assert any("FOR KEY SHARE OF x" in sql for sql in captured)  # a foreign-key check


def test_only_the_operators_commands_read_every_namespace(captured: list[str]) -> None:
    """The statements marked as reading every namespace come from re-embedding (the
    `reembed` command over the whole database), from embedding the rows that waited for
    their vectors (memory/waiting.py: which namespaces hold some, how many) and from the
    scheduled consolidation's look for due namespaces, never from a request."""
    fanned_out = [sql for sql in captured if reads_every_namespace(sql)]
    assert fanned_out
    assert all(
        "embedding_next" in sql
        or "DISTINCT namespace" in sql
        or "embedding_waiting" in sql
        or "consolidation_cursors" in sql
        for sql in fanned_out
    ), fanned_out
