"""Every DateTime a request carries is checked before it reaches PostgreSQL (issue 29): an
instant UTC cannot hold (0001-01-01T00:00+14:00 is in year 0, 9999-12-31T23:59:59-14:00 in
year 10000) is BAD_USER_INPUT on every field that accepts one, never an internal error."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import LiveServer

BEFORE_YEAR_1 = "0001-01-01T00:00:00+14:00"
AFTER_YEAR_9999 = "9999-12-31T23:59:59.999999-14:00"
# The ends of Python's range in UTC: PostgreSQL would store them as -infinity / infinity.
FIRST_UTC = "0001-01-01T00:00:00+00:00"
LAST_UTC = "9999-12-31T23:59:59.999999+00:00"

EDGE = (
    'mutation($at: DateTime) { addEdge(input: {source: {label: "A", name: "a"}, '
    'target: {label: "B", name: "b"}, relation: "r", createMissing: true, validFrom: $at}) '
    "{ id } }"
)
# Every field that takes a DateTime: {ids} are filled in from the graph and facts set up.
FIELDS = {
    "search.asOf": 'query($at: DateTime) { search(query: "q", asOf: $at) { id } }',
    "search.since": 'query($at: DateTime) { search(query: "q", since: $at) { id } }',
    "search.until": 'query($at: DateTime) { search(query: "q", until: $at) { id } }',
    "search.raw.since": (
        'query($at: DateTime) { search(query: "q", layers: [RAW, EPISODE], since: $at) { id } }'
    ),
    "context.asOf": 'query($at: DateTime) { context(query: "q", asOf: $at) { totalTokens } }',
    "neighbors.asOf": (
        'query($at: DateTime) { neighbors(nodeId: "{a}", asOf: $at) { node { id } } }'
    ),
    "path.asOf": 'query($at: DateTime) { path(fromId: "{a}", toId: "{b}", asOf: $at) { length } }',
    "insightSearch.asOf": (
        'query($at: DateTime) { insightSearch(query: "q", asOf: $at) { score } }'
    ),
    "rawDialogue.from": "query($at: DateTime) { rawDialogue(from: $at) { edges { cursor } } }",
    "rawDialogue.to": "query($at: DateTime) { rawDialogue(to: $at) { edges { cursor } } }",
    "storeRawDialogue.timestamp": (
        'mutation($at: DateTime) { storeRawDialogue(input: {sessionId: "s", speaker: "u", '
        'content: "c", timestamp: $at}) { id } }'
    ),
    "addInsight.validFrom": (
        'mutation($at: DateTime) { addInsight(input: {content: "c", validFrom: $at}) { id } }'
    ),
    "storeEpisode.validFrom": (
        'mutation($at: DateTime) { storeEpisode(input: {query: "q", reward: 1, '
        'reflection: "r", validFrom: $at}) { id } }'
    ),
    "addEdge.validFrom": EDGE,
    "invalidateInsight.at": (
        'mutation($at: DateTime) { invalidateInsight(id: "{insight}", at: $at) { id } }'
    ),
    "invalidateEdge.at": 'mutation($at: DateTime) { invalidateEdge(id: "{edge}", at: $at) { id } }',
}


async def setup_facts(api: LiveServer) -> dict[str, str]:
    edge = (await api.data(EDGE))["addEdge"]["id"]
    nodes = await api.data(
        '{ a: nodeByName(label: "A", name: "a") { id } '
        'b: nodeByName(label: "B", name: "b") { id } }'
    )
    insight = await api.data('mutation { addInsight(input: {content: "c"}) { id } }')
    await api.data(
        'mutation { storeRawDialogue(input: {sessionId: "s", speaker: "u", content: "q"}) { id } }'
    )
    return {
        "a": nodes["a"]["id"],
        "b": nodes["b"]["id"],
        "edge": edge,
        "insight": insight["addInsight"]["id"],
    }


def filled(document: str, ids: dict[str, str]) -> str:
    for name, value in ids.items():
        document = document.replace("{" + name + "}", value)
    return document


@pytest.mark.parametrize("moment", [BEFORE_YEAR_1, AFTER_YEAR_9999])
async def test_instants_utc_cannot_hold_are_bad_user_input_everywhere(
    api: LiveServer, moment: str
) -> None:
    ids = await setup_facts(api)
    answers: dict[str, Any] = {}
    for name, document in FIELDS.items():
        body = await api.graphql(filled(document, ids), {"at": moment})
        answers[name] = [(e["extensions"]["code"], e["message"]) for e in body.get("errors", [])]
    for name, errors in answers.items():
        assert len(errors) == 1, (name, errors)
        code, message = errors[0]
        assert code == "BAD_USER_INPUT", (name, errors)
    # the message names the field that was out of range
    assert "asOf" in answers["search.asOf"][0][1]
    assert "until" in answers["search.until"][0][1]
    assert "validFrom" in answers["addEdge.validFrom"][0][1]


@pytest.mark.parametrize("moment", [FIRST_UTC, LAST_UTC])
async def test_the_ends_of_the_range_are_read_over_but_never_stored(
    api: LiveServer, moment: str
) -> None:
    """Reads over the whole range answer; nothing is stored at -infinity or infinity."""
    ids = await setup_facts(api)
    for name, document in FIELDS.items():
        body = await api.graphql(filled(document, ids), {"at": moment})
        errors = [(e["extensions"]["code"], e["message"]) for e in body.get("errors", [])]
        assert {code for code, _ in errors} <= {"BAD_USER_INPUT"}, (name, errors)
        if name in STORED:
            assert errors, name
            assert errors[0][1].endswith("must be between 0001-01-02 and 9999-12-30 (UTC)")
        elif name.startswith(("search.s", "search.u", "search.r", "rawDialogue")):
            assert not errors, (name, errors)


STORED = {
    "storeRawDialogue.timestamp",
    "addInsight.validFrom",
    "storeEpisode.validFrom",
    "addEdge.validFrom",
}
