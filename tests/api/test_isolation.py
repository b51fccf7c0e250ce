"""Namespace isolation matrix: a key of namespace B never sees, changes or learns of A's rows.

The test enumerates the schema: every query, mutation and subscription field must have a probe
in ``PROBES`` or the test fails, so a field added by any layer is checked from the day it
exists. A probe is one call, made by B with A's ids (its ``$variables`` name samples returned
by ``seed_namespace_a``); the answer must equal — after normalising ids and times — B's answer
for ids that exist nowhere, must not contain A's marker text, and A's rows must be unchanged.
A subscription probe also names a trigger mutation: A fires it, then B; B's first event must
be its own.

Adding a field: one entry in ``PROBES``. If it needs an id of a new kind (an insight, a
node...), seed one in ``seed_namespace_a`` (with MARKER in its text) and return it by name;
ids that exist nowhere are generated for every sample name automatically.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

import pytest
from httpx_ws import aconnect_ws
from sqlalchemy import text

from gql_memory.api.schema import build_schema
from gql_memory.db import Database
from gql_memory.keys import ApiKeyStore
from tests.api.test_http_subscriptions import MULTIPART, SSE, multipart_payloads, sse_events
from tests.conftest import LiveServer

A, B = "tenant-a", "tenant-b"
MARKER = "A-SECRET"  # in every text namespace A stores; must never reach B
FIRST_ID = 123_456_700  # A's ids are distinctive numbers, so messages can be normalised


@dataclass(frozen=True)
class Probe:
    """One call of a field. ``variables`` maps each GraphQL variable to a sample name."""

    document: str
    variables: dict[str, str] = field(default_factory=dict)
    expect: dict[str, Any] | None = None  # B's exact data, where a leak shows no marker
    # Subscriptions only: a mutation taking the same variables plus ``$c: String!`` (content)
    # that makes the subscription deliver an event. A fires it (with MARKER), then B does;
    # the first event B receives must be B's own.
    trigger: str | None = None


SESSION = {"s": "session"}
WM = "query($s: String!) { workingMemory(sessionId: $s) { id content sessionId } }"
PROBES: dict[str, Probe] = {
    # --- queries ---------------------------------------------------------------------------
    "workingMemory": Probe(WM, SESSION),
    "workingMemoryItem": Probe(
        "query($id: ID!) { workingMemoryItem(id: $id) { id content } }", {"id": "working"}
    ),
    "staleMemory": Probe(
        "query($s: String) { a: staleMemory(sessionId: $s) { edges { node { id originalContent "
        "} } } all: staleMemory(sessionId: null) { edges { node { id originalContent } } } }",
        SESSION,
    ),
    "rawDialogue": Probe(
        "query($s: String) { a: rawDialogue(sessionId: $s) { edges { node { id content } } } "
        "all: rawDialogue(sessionId: null, speaker: "
        '"user") { edges { node { id content metadata } } } }',
        SESSION,
    ),
    "stats": Probe(
        "{ stats { rawDialogue workingMemory staleMemory sessions } }",
        expect={"stats": {"rawDialogue": 0, "workingMemory": 0, "staleMemory": 0, "sessions": 0}},
    ),
    # --- mutations -------------------------------------------------------------------------
    "storeRawDialogue": Probe(
        'mutation($s: String!) { storeRawDialogue(input: {sessionId: $s, speaker: "user", '
        'content: "b"}) { id sessionId content } }',
        SESSION,
    ),
    "storeRawDialogueBatch": Probe(
        'mutation($s: String!) { storeRawDialogueBatch(input: [{sessionId: $s, speaker: "user", '
        'content: "b"}]) { id content } }',
        SESSION,
    ),
    "addWorkingMemory": Probe(
        'mutation($s: String!, $ref: ID!) { addWorkingMemory(input: {content: "b", sessionId: '
        "$s, refKind: RAW, refId: $ref}) { addedId evictedId archivedId currentCount } }",
        {"s": "session", "ref": "raw"},
    ),
    "accessWorkingMemory": Probe(
        "mutation($id: ID!) { accessWorkingMemory(id: $id) { id content } }", {"id": "working"}
    ),
    "archiveWorkingMemory": Probe(
        "mutation($id: ID!) { archiveWorkingMemory(id: $id) { id originalContent } }",
        {"id": "working"},
    ),
    "clearWorkingMemory": Probe(
        "mutation($s: String!) { clearWorkingMemory(sessionId: $s) }", SESSION
    ),
    "restoreStaleMemory": Probe(
        "mutation($id: ID!) { restoreStaleMemory(id: $id) { addedId currentCount } }",
        {"id": "stale"},
    ),
    "forgetSession": Probe("mutation($s: String!) { forgetSession(sessionId: $s) }", SESSION),
    # --- semantic layers ---------------------------------------------------------------------
    "insight": Probe(
        "query($id: ID!) { insight(id: $id) { id content sourceIds metadata } }", {"id": "insight"}
    ),
    "insights": Probe(
        "{ insights { edges { node { id content } } } "
        "all: insights(includeSuperseded: true) { edges { node { id content } } } }",
        expect={"insights": {"edges": []}, "all": {"edges": []}},
    ),
    "insightSearch": Probe(
        '{ insightSearch(query: "secret insight") { score insight { id content } } }',
        expect={"insightSearch": []},
    ),
    "episode": Probe(
        "query($id: ID!) { episode(id: $id) { id query reflection } }", {"id": "episode"}
    ),
    "similarEpisodes": Probe(
        '{ similarEpisodes(query: "secret episode", minSimilarity: -1, topK: 10) '
        "{ similarity episode { id query } } }",
        expect={"similarEpisodes": []},
    ),
    # superseding across namespaces is impossible: A's facts are unknown ids to B
    "addInsight": Probe(
        'mutation($r: ID!, $i: ID!) { addInsight(input: {content: "b", sourceIds: [$r]}) '
        '{ id content } replacing: addInsight(input: {content: "b", supersedes: [$i]}) '
        "{ id supersedes } }",
        {"r": "raw", "i": "insight"},
    ),
    "consolidationHistory": Probe(
        "{ consolidationHistory { edges { node { id kind targetId ids reason evidence } } } }"
    ),
    "consolidate": Probe("mutation { consolidate { insightsExamined actions { id kind ids } } }"),
    "undoConsolidation": Probe(
        "mutation($a: ID!) { undoConsolidation(actionId: $a) { restored } }", {"a": "action"}
    ),
    "invalidateInsight": Probe(
        "mutation($id: ID!) { invalidateInsight(id: $id) { id content validTo } }",
        {"id": "insight"},
    ),
    "deleteInsight": Probe("mutation($id: ID!) { deleteInsight(id: $id) }", {"id": "insight"}),
    "storeEpisode": Probe(
        'mutation($e: ID!) { storeEpisode(input: {query: "b", reward: 0, reflection: "b", '
        "supersedes: [$e]}) { id query } }",
        {"e": "episode"},
    ),
    "deleteEpisode": Probe("mutation($id: ID!) { deleteEpisode(id: $id) }", {"id": "episode"}),
    # --- graph -----------------------------------------------------------------------------
    "node": Probe(
        "query($id: ID!) { node(id: $id) { id name properties edges { id } } }", {"id": "node"}
    ),
    "nodeByName": Probe(
        "query($l: String!, $n: String!) { nodeByName(label: $l, name: $n) { id properties } }",
        {"l": "label", "n": "node_name"},
    ),
    "nodes": Probe("{ nodes { edges { node { id name } } } }", expect={"nodes": {"edges": []}}),
    "neighbors": Probe(
        "query($id: ID!) { neighbors(nodeId: $id, depth: 2) { distance node { id properties } } }",
        {"id": "node"},
    ),
    "path": Probe(
        "query($a: ID!, $b: ID!) { path(fromId: $a, toId: $b) { length nodes { id } } }",
        {"a": "node", "b": "node2"},
    ),
    "addNode": Probe(
        "mutation($l: String!, $n: String!, $i: ID!) { own: addNode(input: {label: $l, name: "
        '$n}) { id name properties } tied: addNode(input: {label: $l, name: "x", '
        "insightId: $i}) { id } }",
        {"l": "label", "n": "node_name", "i": "insight"},
    ),
    "addEdge": Probe(
        "mutation($a: ID!, $b: ID!, $e: ID!) { addEdge(input: {sourceId: $a, targetId: $b, "
        'relation: "r"}) { id } replacing: addEdge(input: {source: {label: "L", name: "x"}, '
        'target: {label: "L", name: "y"}, createMissing: true, relation: "r", '
        "supersedes: [$e]}) { id } }",
        {"a": "node", "b": "node2", "e": "edge"},
    ),
    "invalidateEdge": Probe(
        "mutation($id: ID!) { invalidateEdge(id: $id) { id relation validTo } }", {"id": "edge"}
    ),
    "deleteNode": Probe("mutation($id: ID!) { deleteNode(id: $id) }", {"id": "node"}),
    # --- search, context and extraction -------------------------------------------------------
    "context": Probe(
        'query($s: String!) { context(query: "secret insight episode said", sessionId: $s) '
        "{ text totalTokens sections { kind items { id content } } } }",
        SESSION,
    ),
    "search": Probe(
        '{ search(query: "secret insight episode said", layers: [INSIGHT, EPISODE, RAW]) '
        "{ layer id content } }",
        expect={"search": []},
    ),
    "ingestToolOutput": Probe(
        'mutation($s: String!) { ingestToolOutput(input: {toolName: "Bash", output: '
        '"git commit -m x", sessionId: $s}) { stored workingMemory { currentCount } } }',
        SESSION,
    ),
    # --- subscriptions -----------------------------------------------------------------------
    "workingMemoryChanged": Probe(
        "subscription($s: String!) { workingMemoryChanged(sessionId: $s) "
        "{ event { kind } items { content } } }",
        SESSION,
        trigger="mutation($s: String!, $c: String!) { addWorkingMemory(input: {content: $c, "
        "sessionId: $s}) { addedId } }",
    ),
    # A's trigger writes into a session named after its content (MARKER): a leaked event
    # would carry it in sessionId
    "memoryEvents": Probe(
        "subscription { memoryEvents { kind sessionId } }",
        trigger='mutation($c: String!) { addWorkingMemory(input: {content: "x", '
        "sessionId: $c}) { addedId } }",
    ),
}

# B's second call uses values that exist in no namespace: these names, or ids from here on.
MISSING_NAMES = {
    "session": "no-such-session",
    "label": "NoSuchLabel",
    "node_name": "no-such-node",
}
MISSING_FIRST_ID = 987_654_300

TIME_KEYS = {"timestamp", "lastAccessed", "createdAt", "archivedAt", "cursor"}
TIME_KEYS |= {"startCursor", "endCursor"}


def schema_fields() -> list[tuple[str, str]]:
    """(operation type, field name) of every root field: query, mutation, subscription."""
    schema = build_schema()._schema
    roots = {
        "query": schema.query_type,
        "mutation": schema.mutation_type,
        "subscription": schema.subscription_type,
    }
    return [(kind, name) for kind, root in roots.items() if root for name in root.fields]


def test_every_field_of_the_schema_has_an_isolation_probe() -> None:
    missing = [f"{root}.{name}" for root, name in schema_fields() if name not in PROBES]
    assert not missing, (
        f"the isolation matrix has no probe for {', '.join(missing)}: add one entry per field "
        "to PROBES in tests/api/test_isolation.py"
    )


async def seed_namespace_a(api_a: LiveServer) -> dict[str, str]:
    """A's rows in every layer, all text carrying MARKER; returns the sample ids and names."""
    session = "a-session"  # names are B's to use too; only A's contents carry MARKER
    raw = await api_a.data(
        'mutation($s: String!) { storeRawDialogue(input: {sessionId: $s, speaker: "user", '
        f'content: "{MARKER} said", metadata: {{secret: "{MARKER}"}}}}) {{ id }} }}',
        {"s": session},
    )
    results = [
        (
            await api_a.data(
                "mutation($s: String!, $c: String!) { addWorkingMemory(input: {content: $c, "
                "sessionId: $s}) { addedId archivedId } }",
                {"s": session, "c": f"{MARKER} item {i}"},
            )
        )["addWorkingMemory"]
        for i in range(12)
    ]
    archived = [r["archivedId"] for r in results if r["archivedId"]]
    raw_id = raw["storeRawDialogue"]["id"]
    insight = await api_a.data(
        "mutation($r: ID!) { addInsight(input: {content: "
        f'"{MARKER} secret insight", sourceIds: [$r], metadata: {{k: "{MARKER}"}}}}) {{ id }} }}',
        {"r": raw_id},
    )
    episode = await api_a.data(
        f'mutation {{ storeEpisode(input: {{query: "{MARKER} secret episode", reward: 0.5, '
        f'reflection: "{MARKER}"}}) {{ id }} }}'
    )
    insight_id = insight["addInsight"]["id"]
    node = await api_a.data(
        'mutation($i: ID!) { addNode(input: {label: "Secret", name: "a-node", '
        f'properties: {{k: "{MARKER}"}}, insightId: $i}}) {{ id }} }}',
        {"i": insight_id},
    )
    node2 = await api_a.data(
        'mutation { addNode(input: {label: "Secret", name: "a-node-2", '
        f'properties: {{k: "{MARKER}"}}}}) {{ id }} }}'
    )
    edge = await api_a.data(
        "mutation($a: ID!, $b: ID!) { addEdge(input: {sourceId: $a, targetId: $b, "
        f'relation: "knows", properties: {{k: "{MARKER}"}}}}) {{ id }} }}',
        {"a": node["addNode"]["id"], "b": node2["addNode"]["id"]},
    )
    await api_a.data(  # a duplicate, merged by consolidation: a journaled action
        f'mutation {{ addInsight(input: {{content: "{MARKER} secret insight"}}) {{ id }} }}'
    )
    consolidated = await api_a.data("mutation { consolidate { actions { id } } }")
    return {
        "action": consolidated["consolidate"]["actions"][0]["id"],
        "session": session,
        "raw": raw_id,
        "working": results[-1]["addedId"],
        "stale": archived[0],
        "insight": insight_id,
        "episode": episode["storeEpisode"]["id"],
        "node": node["addNode"]["id"],
        "node2": node2["addNode"]["id"],
        "edge": edge["addEdge"]["id"],
        "label": "Secret",
        "node_name": "a-node",
    }


async def namespaced_tables(db: Database) -> list[str]:
    async with db.read() as conn:
        rows = await conn.execute(
            text(
                "SELECT table_name FROM information_schema.columns WHERE table_schema = 'public' "
                "AND column_name = 'namespace' AND table_name <> 'api_keys' ORDER BY 1"
            )
        )
        return list(rows.scalars())


async def snapshot(db: Database, namespace: str) -> dict[str, tuple[int, str | None]]:
    """Row count and a digest of every row, per table, of one namespace."""
    result = {}
    async with db.read() as conn:
        for table in await namespaced_tables(db):
            row = (
                await conn.execute(
                    text(
                        f"SELECT count(*), md5(string_agg(t::text, '|' ORDER BY t::text)) "
                        f"FROM {table} t WHERE namespace = :ns"
                    ),
                    {"ns": namespace},
                )
            ).one()
            result[table] = (row[0], row[1])
    return result


async def empty_namespace(db: Database, namespace: str) -> None:
    tables = await namespaced_tables(db)
    async with db.write() as conn:
        for table in tables:
            await conn.execute(
                text(f"DELETE FROM {table} WHERE namespace = :ns"), {"ns": namespace}
            )


def normalise(value: Any, samples: dict[str, str]) -> Any:
    """Ids, times and cursors differ between two calls by nature; everything else must not."""
    if isinstance(value, dict):
        return {
            k: "<time>"
            if k in TIME_KEYS
            else "<id>"
            if (k == "id" or k.endswith("Id")) and v is not None
            else normalise(v, samples)
            for k, v in value.items()
            if k != "requestId"
        }
    if isinstance(value, list):
        return [normalise(v, samples) for v in value]
    if isinstance(value, str):
        for name, sample in samples.items():
            value = re.sub(rf"\b{re.escape(sample)}\b", f"<{name}>", value)
    return value


def missing_samples(samples: dict[str, str]) -> dict[str, str]:
    """For each sample of A, a value of the same kind that exists in no namespace."""
    return {
        kind: MISSING_NAMES.get(kind, str(MISSING_FIRST_ID + i))
        for i, kind in enumerate(sorted(samples))
    }


async def test_namespace_b_never_sees_changes_or_learns_of_a(
    secure_api: LiveServer, db: Database, key_store: ApiKeyStore
) -> None:
    async with db.write() as conn:  # A's ids: distinctive, and different in every table
        await conn.execute(
            text(
                "SELECT setval(format('%I', sequencename), :first + 1000 * row_number() OVER ()) "
                "FROM pg_sequences WHERE schemaname = 'public'"
            ),
            {"first": FIRST_ID},
        )
    api_a = secure_api.with_key((await key_store.create(A, "read,write")).secret)
    api_b = secure_api.with_key((await key_store.create(B, "read,write")).secret)
    samples = await seed_namespace_a(api_a)
    async with db.write() as conn:  # where A's scheduled consolidation left off
        await conn.execute(
            text("INSERT INTO consolidation_cursors (namespace) VALUES (:ns)"), {"ns": A}
        )
    missing = missing_samples(samples)
    a_rows = await snapshot(db, A)
    assert all(count for count, _ in a_rows.values()), f"seed every layer of A: {a_rows}"
    for root, name in schema_fields():
        probe = PROBES[name]
        if root == "subscription":
            event = await first_subscription_event(secure_api, api_a, api_b, probe, samples)
            assert MARKER not in json.dumps(event), f"{name} delivered A's event to B: {event}"
            a_rows = await snapshot(db, A)  # A's own trigger wrote to A
            continue
        answers = []
        for values in (samples, missing):
            await empty_namespace(db, B)
            variables = {var: values[kind] for var, kind in probe.variables.items()}
            answers.append(await api_b.graphql(probe.document, variables))
        with_a_ids, with_missing_ids = answers
        assert MARKER not in json.dumps(with_a_ids), f"{name} leaked A's data: {with_a_ids}"
        assert "INTERNAL_SERVER_ERROR" not in json.dumps(with_a_ids), with_a_ids
        assert normalise(with_a_ids, samples) == normalise(with_missing_ids, missing), (
            f"{name}: A's ids answer differently from ids that exist nowhere:\n"
            f"{with_a_ids}\n{with_missing_ids}"
        )
        if probe.expect is not None:
            assert with_a_ids.get("data") == probe.expect, f"{name}: {with_a_ids}"
        assert await snapshot(db, A) == a_rows, f"{name}, called by B, changed A's rows"


async def first_subscription_event(
    server: LiveServer,
    api_a: LiveServer,
    api_b: LiveServer,
    probe: Probe,
    samples: dict[str, str],
) -> dict[str, Any]:
    """B subscribes (with A's sample values); A, then B, fire the trigger; B's first event."""
    assert probe.trigger, "a subscription probe needs a trigger mutation"
    variables = {var: samples[kind] for var, kind in probe.variables.items()}
    key = api_b.headers["Authorization"].removeprefix("Bearer ")
    async with aconnect_ws(
        f"{server.base_url}/graphql", server.client, subprotocols=["graphql-transport-ws"]
    ) as ws:
        await ws.send_json({"type": "connection_init", "payload": {"apiKey": key}})
        assert (await asyncio.wait_for(ws.receive_json(), 30))["type"] == "connection_ack"
        await ws.send_json(
            {
                "id": "1",
                "type": "subscribe",
                "payload": {"query": probe.document, "variables": variables},
            }
        )
        await api_a.data(probe.trigger, {**variables, "c": f"{MARKER} event"})
        for _ in range(20):  # B's subscription may take a moment to start listening
            await api_b.data(probe.trigger, {**variables, "c": "b event"})
            try:
                message = await asyncio.wait_for(ws.receive_json(), 0.5)
            except TimeoutError:
                continue
            assert message["type"] == "next", message
            return message
    raise AssertionError("B's subscription never delivered B's own event")


@pytest.mark.parametrize("name", sorted(PROBES))
def test_probes_name_fields_that_exist(name: str) -> None:
    assert name in {n for _, n in schema_fields()}, f"PROBES has an entry for unknown field {name}"


# --- the HTTP transports: streams, batches, persisted documents ------------------------------


async def first_stream_event(
    api_a: LiveServer, api_b: LiveServer, probe: Probe, samples: dict[str, str], transport: str
) -> Any:
    """B subscribes over an HTTP stream (with A's sample values); A, then B, fire the
    trigger; B's first event."""
    assert probe.trigger, "a subscription probe needs a trigger mutation"
    variables = {var: samples[kind] for var, kind in probe.variables.items()}
    headers = {**api_b.headers, **(SSE if transport == "sse" else MULTIPART)}
    body = {"query": probe.document, "variables": variables}
    async with api_b.client.stream("POST", "/graphql", json=body, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        if transport == "sse":
            first = asyncio.ensure_future(anext(sse_events(response)))
        else:
            first = asyncio.ensure_future(anext(multipart_payloads(response)))
        await api_a.data(probe.trigger, {**variables, "c": f"{MARKER} event"})
        for _ in range(20):  # B's subscription may take a moment to start listening
            await api_b.data(probe.trigger, {**variables, "c": "b event"})
            try:
                return await asyncio.wait_for(asyncio.shield(first), 0.5)
            except TimeoutError:
                continue
    raise AssertionError(f"B's {transport} subscription never delivered B's own event")


async def test_http_streams_and_batches_never_cross_namespaces(
    secure_api: LiveServer, db: Database, key_store: ApiKeyStore
) -> None:
    """Every subscription over SSE and multipart delivers B only B's events; every query,
    batched, answers B as it answers alone (no A row)."""
    api_a = secure_api.with_key((await key_store.create(A, "read,write")).secret)
    api_b = secure_api.with_key((await key_store.create(B, "read,write")).secret)
    samples = await seed_namespace_a(api_a)
    for root, name in schema_fields():
        if root != "subscription":
            continue
        for transport in ("sse", "multipart"):
            event = await first_stream_event(api_a, api_b, PROBES[name], samples, transport)
            assert MARKER not in json.dumps(event), f"{name} over {transport} leaked: {event}"
            assert "errors" not in json.dumps(event), event
    queries = [
        {
            "query": PROBES[name].document,
            "variables": {v: samples[k] for v, k in PROBES[name].variables.items()},
        }
        for root, name in schema_fields()
        if root == "query"
    ]
    for start in range(0, len(queries), 10):
        response = await api_b.client.post(
            "/graphql", json=queries[start : start + 10], headers=api_b.headers
        )
        assert response.status_code == 200
        assert len(response.json()) == len(queries[start : start + 10])
        assert MARKER not in response.text, response.text
        assert "INTERNAL_SERVER_ERROR" not in response.text, response.text


async def test_apq_registrations_never_cross_namespaces(
    secure_api: LiveServer, key_store: ApiKeyStore
) -> None:
    """A's registered document is unknown to B (B learns nothing of it), and B registering
    the same hash runs B's own query for B only."""
    api_a = secure_api.with_key((await key_store.create(A, "read,write")).secret)
    api_b = secure_api.with_key((await key_store.create(B, "read,write")).secret)
    await api_a.data(WM, {"s": "session"})
    query = "query Secret { stats { workingMemory } }"
    digest = hashlib.sha256(query.encode()).hexdigest()
    persisted = {"persistedQuery": {"version": 1, "sha256Hash": digest}}
    registered = await api_a.client.post(
        "/graphql", json={"query": query, "extensions": persisted}, headers=api_a.headers
    )
    assert registered.json()["data"]
    by_hash = {"extensions": persisted}
    answer = await api_b.client.post("/graphql", json=by_hash, headers=api_b.headers)
    assert answer.json()["errors"][0]["extensions"]["code"] == "PERSISTED_QUERY_NOT_FOUND"
    assert (await api_a.client.post("/graphql", json=by_hash, headers=api_a.headers)).json()["data"]
