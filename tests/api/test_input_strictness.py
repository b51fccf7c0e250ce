"""Small input rules found by an attacker's probe (issue 11): ids are plain digits, edge
weights are bounded, clients archive manually only, stored timestamps stay finite, and a
document with several operations needs an operationName."""

from __future__ import annotations

import pytest

from tests.conftest import LiveServer

ADD = 'mutation { addWorkingMemory(input: {content: "x"}) { addedId } }'


@pytest.mark.parametrize("raw", ["1_0", "+1", " 1 ", "١", "1.0", "0x1", "", "-1"])
async def test_ids_are_plain_ascii_digits(api: LiveServer, raw: str) -> None:
    added = await api.data(ADD)
    assert added["addWorkingMemory"]["addedId"] == "1"
    error = await api.error(
        "mutation($id: ID!) { accessWorkingMemory(id: $id) { id } }", {"id": raw}
    )
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert "id must be" in error["message"]


@pytest.mark.parametrize("weight", [1e308, -5.0, 1_000_001.0])
async def test_edge_weights_are_bounded(api: LiveServer, weight: float) -> None:
    error = await api.error(
        'mutation($w: Float!) { addEdge(input: {source: {label: "A", name: "a"}, '
        'target: {label: "B", name: "b"}, relation: "r", weight: $w, createMissing: true}) '
        "{ id } }",
        {"w": weight},
    )
    assert error["message"] == "weight must be between 0 and 1000000"


@pytest.mark.parametrize("reason", ["LRU_EVICTION", "DECAY_EVICTION"])
async def test_a_client_cannot_claim_the_services_archive_reasons(
    api: LiveServer, reason: str
) -> None:
    item = (await api.data(ADD))["addWorkingMemory"]["addedId"]
    error = await api.error(
        "mutation($id: ID!, $r: ArchiveReason!) { archiveWorkingMemory(id: $id, reason: $r) "
        "{ id } }",
        {"id": item, "r": reason},
    )
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert "MANUAL_ARCHIVE" in error["message"]


@pytest.mark.parametrize("moment", ["0001-01-01T00:00:00+00:00", "9999-12-31T23:59:59+00:00"])
async def test_stored_timestamps_stay_finite(api: LiveServer, moment: str) -> None:
    error = await api.error(
        'mutation($t: DateTime!) { storeRawDialogue(input: {sessionId: "s", speaker: "u", '
        'content: "c", timestamp: $t}) { id } }',
        {"t": moment},
    )
    assert error["message"] == "timestamp must be between 0001-01-02 and 9999-12-30 (UTC)"
    kept = await api.data(
        'mutation($t: DateTime!) { storeRawDialogue(input: {sessionId: "s", speaker: "u", '
        'content: "c", timestamp: $t}) { timestamp } }',
        {"t": "0001-01-02T00:00:00+00:00"},
    )
    assert kept["storeRawDialogue"]["timestamp"].endswith("+00:00")


async def test_several_operations_need_an_operation_name(api: LiveServer) -> None:
    document = "query A { stats { sessions } } mutation B { " + ADD[len("mutation { ") :]
    error = await api.error(document)
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert "operationName" in error["message"]
    named = await api.client.post("/graphql", json={"query": document, "operationName": "A"})
    assert named.json()["data"] == {"stats": {"sessions": 0}}
