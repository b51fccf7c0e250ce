"""Raw dialogue through real HTTP."""

from __future__ import annotations

from tests.conftest import LiveServer

STORE = """
mutation Store($input: RawDialogueInput!) {
  storeRawDialogue(input: $input) { id sessionId speaker content metadata timestamp }
}
"""
LIST = """
query List($sessionId: String, $from: DateTime, $to: DateTime, $dateRange: String,
           $speaker: String, $first: Int, $after: String) {
  rawDialogue(sessionId: $sessionId, from: $from, to: $to, dateRange: $dateRange,
              speaker: $speaker, first: $first, after: $after) {
    edges { cursor node { id content speaker timestamp } }
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
  }
}
"""


async def test_store_and_read_back_with_metadata(api: LiveServer) -> None:
    turn = {"sessionId": "s1", "speaker": "user", "content": "Hi", "metadata": {"lang": "en"}}
    stored = (await api.data(STORE, {"input": turn}))["storeRawDialogue"]
    assert stored["metadata"] == {"lang": "en"} and stored["timestamp"].endswith("+00:00")
    listed = await api.data(LIST, {"sessionId": "s1"})
    assert [e["node"]["id"] for e in listed["rawDialogue"]["edges"]] == [stored["id"]]


async def test_batch_with_timestamps_and_filters(api: LiveServer) -> None:
    turns = [
        {
            "sessionId": "s",
            "speaker": "user",
            "content": "old",
            "timestamp": "2024-01-01T10:00:00Z",
        },
        {"sessionId": "s", "speaker": "bot", "content": "mid", "timestamp": "2024-02-01T10:00:00Z"},
        {
            "sessionId": "s",
            "speaker": "user",
            "content": "new",
            "timestamp": "2024-03-01T10:00:00Z",
        },
    ]
    stored = await api.data(
        "mutation($t: [RawDialogueInput!]!) { storeRawDialogueBatch(input: $t) { id content } }",
        {"t": turns},
    )
    assert [t["content"] for t in stored["storeRawDialogueBatch"]] == ["old", "mid", "new"]
    feb = await api.data(LIST, {"sessionId": "s", "dateRange": "2024-02-01:2024-02-29"})
    assert [e["node"]["content"] for e in feb["rawDialogue"]["edges"]] == ["mid"]
    ranged = await api.data(
        LIST, {"sessionId": None, "from": "2024-01-01T00:00:00Z", "to": "2024-02-15T00:00:00Z"}
    )
    assert [e["node"]["content"] for e in ranged["rawDialogue"]["edges"]] == ["mid", "old"]
    users = await api.data(LIST, {"sessionId": "s", "speaker": "user", "first": 1})
    page = users["rawDialogue"]
    assert [e["node"]["content"] for e in page["edges"]] == ["new"]
    assert page["pageInfo"]["hasNextPage"]
    rest = await api.data(
        LIST, {"sessionId": "s", "speaker": "user", "after": page["pageInfo"]["endCursor"]}
    )
    assert [e["node"]["content"] for e in rest["rawDialogue"]["edges"]] == ["old"]


async def test_invalid_date_range_is_bad_user_input(api: LiveServer) -> None:
    error = await api.error(LIST, {"dateRange": "January"})
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert error["message"] == "Invalid date_range format. Expected: YYYY-MM-DD:YYYY-MM-DD"


async def test_invalid_datetime_argument_is_bad_user_input(api: LiveServer) -> None:
    error = await api.error(LIST, {"from": "yesterday"})
    assert error["extensions"]["code"] == "BAD_USER_INPUT"


async def test_no_match_is_an_empty_list(api: LiveServer) -> None:
    data = await api.data(LIST, {"sessionId": "nobody"})
    assert data["rawDialogue"]["edges"] == []


async def test_batch_with_one_bad_turn_writes_nothing(api: LiveServer) -> None:
    turns = [
        {"sessionId": "s", "speaker": "user", "content": "fine"},
        {"sessionId": "s", "speaker": "user", "content": "   "},
    ]
    error = await api.error(
        "mutation($t: [RawDialogueInput!]!) { storeRawDialogueBatch(input: $t) { id } }",
        {"t": turns},
    )
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert error["message"] == "turn 1: content must not be empty"
    assert (await api.data(LIST, {"sessionId": None}))["rawDialogue"]["edges"] == []
