"""Working and stale memory through real HTTP: operation names as in SPEC §4."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from gql_memory.db import Database
from tests.conftest import LiveServer

ADD = """
mutation Add($input: WorkingMemoryInput!) {
  addWorkingMemory(input: $input) { addedId evictedId archivedId currentCount }
}
"""


async def add(api: LiveServer, content: str, importance: float = 0.5, session: str = "default"):
    variables = {"input": {"content": content, "importance": importance, "sessionId": session}}
    return (await api.data(ADD, variables))["addWorkingMemory"]


async def test_add_list_and_evict(api: LiveServer) -> None:
    for i in range(10):
        await add(api, f"item {i}")
    result = await add(api, "item 10")
    assert result["evictedId"] and result["archivedId"] and result["currentCount"] == 10
    data = await api.data(
        "{ workingMemory { id content importance attention mentionCount lastAccessed createdAt } }"
    )
    assert [i["content"] for i in data["workingMemory"]][0] == "item 10"
    assert len(data["workingMemory"]) == 10
    stale = await api.data(
        "{ staleMemory(reason: LRU_EVICTION) { edges { cursor node { id originalId "
        "originalContent importance reason archivedAt } } pageInfo { hasNextPage endCursor } } }"
    )
    node = stale["staleMemory"]["edges"][0]["node"]
    assert node["originalContent"] == "item 0" and node["originalId"] == result["evictedId"]
    assert node["id"] == result["archivedId"]


async def test_add_reports_what_decay_archived(api: LiveServer) -> None:
    zero = await add(api, "noise", importance=0.0)
    data = await api.data(
        "mutation($input: WorkingMemoryInput!) { addWorkingMemory(input: $input) "
        "{ addedId evictedId decayedIds } }",
        {"input": {"content": "signal", "importance": 0.5}},
    )
    result = data["addWorkingMemory"]
    assert result["decayedIds"] == [zero["addedId"]] and result["evictedId"] is None
    stale = await api.data(
        "{ staleMemory(reason: DECAY_EVICTION) { edges { node { originalId } } } }"
    )
    assert [e["node"]["originalId"] for e in stale["staleMemory"]["edges"]] == [zero["addedId"]]


async def test_access_archive_restore_clear(api: LiveServer) -> None:
    added = await add(api, "remember me", 0.9)
    item_id = added["addedId"]
    touched = await api.data(
        "mutation($id: ID!) { accessWorkingMemory(id: $id) { id mentionCount } }", {"id": item_id}
    )
    assert touched["accessWorkingMemory"]["mentionCount"] == 1
    archived = await api.data(
        "mutation($id: ID!) { archiveWorkingMemory(id: $id) { id reason originalId } }",
        {"id": item_id},
    )
    assert archived["archiveWorkingMemory"]["reason"] == "MANUAL_ARCHIVE"
    item = await api.data("query($id: ID!) { workingMemoryItem(id: $id) { id } }", {"id": item_id})
    assert item["workingMemoryItem"] is None
    restored = await api.data(
        "mutation($id: ID!) { restoreStaleMemory(id: $id) { addedId currentCount } }",
        {"id": archived["archiveWorkingMemory"]["id"]},
    )
    assert restored["restoreStaleMemory"]["currentCount"] == 1
    cleared = await api.data('mutation { clearWorkingMemory(sessionId: "default") }')
    assert cleared["clearWorkingMemory"] == 1
    stale = await api.data("{ staleMemory(importanceMin: 0.8) { edges { node { reason } } } }")
    assert [e["node"]["reason"] for e in stale["staleMemory"]["edges"]] == ["MANUAL_ARCHIVE"]


async def test_sessions_are_kept_apart(api: LiveServer) -> None:
    await add(api, "in a", session="a")
    await add(api, "in b", session="b")
    data = await api.data('{ a: workingMemory(sessionId: "a") { content } workingMemory { id } }')
    assert data["a"] == [{"content": "in a"}]
    assert data["workingMemory"] == []


async def test_forget_session_erases_every_layer_of_it(api: LiveServer) -> None:
    await add(api, "x", session="gone")
    await api.data(
        'mutation { storeRawDialogue(input: {sessionId: "gone", speaker: "user", content: "hi"})'
        " { id } }"
    )
    await add(api, "y", session="kept")
    assert (await api.data('mutation { forgetSession(sessionId: "gone") }'))["forgetSession"] == 2
    stats = (await api.data("{ stats { rawDialogue workingMemory staleMemory sessions } }"))[
        "stats"
    ]
    assert stats == {"rawDialogue": 0, "workingMemory": 1, "staleMemory": 0, "sessions": 1}


async def test_a_session_counts_while_it_holds_anything_archived_items_included(
    api: LiveServer,
) -> None:
    """stats.sessions counts what the dashboard lists: working memory, dialogue or stale."""
    await add(api, "kept", session="working")
    await api.data(
        'mutation { storeRawDialogue(input: {sessionId: "talk", speaker: "user", content: "hi"})'
        " { id } }"
    )
    archived = await add(api, "archived", session="stale")
    await api.data(
        "mutation($id: ID!) { archiveWorkingMemory(id: $id) { id } }", {"id": archived["addedId"]}
    )
    stats = (await api.data("{ stats { workingMemory staleMemory sessions } }"))["stats"]
    assert stats == {"workingMemory": 1, "staleMemory": 1, "sessions": 3}


@pytest.mark.parametrize("run", range(3))
async def test_concurrent_http_adds_never_exceed_capacity(
    api: LiveServer, db: Database, run: int
) -> None:
    adds = 200
    results = await asyncio.gather(*(add(api, f"run {run} item {i}") for i in range(adds)))
    assert len({r["addedId"] for r in results}) == adds
    async with db.read() as conn:
        working = await conn.scalar(text("SELECT count(*) FROM working_memory"))
        stale = await conn.scalar(text("SELECT count(*) FROM stale_memory"))
    assert (working, working + stale) == (10, adds)
