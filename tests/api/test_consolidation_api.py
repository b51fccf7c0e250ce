"""Consolidation over HTTP: the consolidate mutation, its report, the journal and undo."""

from __future__ import annotations

from tests.conftest import LiveServer

ACTION = "id kind targetId ids reason evidence createdAt undoneAt"


async def add(api: LiveServer, content: str, valid_from: str) -> str:
    data = await api.data(
        "mutation($i: InsightInput!) { addInsight(input: $i) { id } }",
        {"i": {"content": content, "validFrom": valid_from}},
    )
    return data["addInsight"]["id"]


async def test_consolidate_reports_journals_and_undoes(api: LiveServer) -> None:
    berlin = await add(api, "Carol lives in Berlin.", "2026-01-01T00:00:00Z")
    munich = await add(api, "Carol moved to Munich.", "2026-06-01T00:00:00Z")
    dry = await api.data(
        f"mutation {{ consolidate(dryRun: true) {{ dryRun actions {{ {ACTION} }} }} }}"
    )
    [planned] = dry["consolidate"]["actions"]
    assert dry["consolidate"]["dryRun"] and planned["id"] is None and planned["kind"] == "SUPERSEDE"
    done = await api.data(
        f"mutation {{ consolidate {{ insightsExamined actions {{ {ACTION} }} }} }}"
    )
    [action] = done["consolidate"]["actions"]
    assert (action["targetId"], action["ids"]) == (munich, [berlin])
    assert action["evidence"]["attribute"] == "residence" and "munich" in action["reason"]
    old = await api.data(
        "query($id: ID!) { insight(id: $id) { validTo supersededBy supersessionReason } }",
        {"id": berlin},
    )
    assert old["insight"]["supersededBy"] == munich
    assert old["insight"]["supersessionReason"] == "UPDATED"
    again = await api.data("mutation { consolidate { actions { id } } }")
    assert again["consolidate"]["actions"] == []
    history = await api.data(f"{{ consolidationHistory {{ edges {{ node {{ {ACTION} }} }} }} }}")
    assert [e["node"]["id"] for e in history["consolidationHistory"]["edges"]] == [action["id"]]
    undone = await api.data(
        "mutation($a: ID!) { undoConsolidation(actionId: $a) { restored left { id why } "
        "action { undoneAt } } }",
        {"a": action["id"]},
    )
    assert undone["undoConsolidation"]["restored"] == [berlin]
    assert undone["undoConsolidation"]["action"]["undoneAt"] is not None
    reopened = await api.data("query($id: ID!) { insight(id: $id) { validTo } }", {"id": berlin})
    assert reopened["insight"]["validTo"] is None


async def test_undoing_an_unknown_or_undone_action_is_a_coded_error(api: LiveServer) -> None:
    error = await api.error('mutation { undoConsolidation(actionId: "999999") { restored } }')
    assert error["extensions"]["code"] == "NOT_FOUND" and "999999" in error["message"]
    await add(api, "Dan works at Acme.", "2026-01-01T00:00:00Z")
    await add(api, "Dan works at Acme.", "2026-02-01T00:00:00Z")
    done = await api.data("mutation { consolidate { actions { id kind } } }")
    [merge] = done["consolidate"]["actions"]
    assert merge["kind"] == "MERGE"
    query = "mutation($a: ID!) { undoConsolidation(actionId: $a) { restored } }"
    await api.data(query, {"a": merge["id"]})
    error = await api.error(query, {"a": merge["id"]})
    assert error["extensions"]["code"] == "BAD_USER_INPUT" and "already undone" in error["message"]
