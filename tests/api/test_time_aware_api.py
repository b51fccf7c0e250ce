"""Facts that change, over HTTP: supersession, as-of reads, history, invalidation, hints."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from tests.conftest import LiveServer

PARIS = "The user lives in Paris and works at a bakery"
BERLIN = "The user moved to Berlin and works at a bakery"
QUESTION = "where does the user live and work"
HIT = "layer id content validTo supersededBy filteredNow"


async def add_insight(api: LiveServer, content: str, supersedes: list[str] | None = None) -> dict:
    data = await api.data(
        "mutation($i: InsightInput!) { addInsight(input: $i) { id content validFrom validTo "
        "supersededBy supersedes } }",
        {"i": {"content": content, "supersedes": supersedes or []}},
    )
    return data["addInsight"]


async def between(api: LiveServer) -> str:
    """An instant strictly between two writes (the database clock, not the test's)."""
    await asyncio.sleep(0.01)
    moment = datetime.now(UTC).isoformat()
    await asyncio.sleep(0.01)
    return moment


async def search(api: LiveServer, as_of: str | None = None) -> list[dict]:
    data = await api.data(
        f"query($q: String!, $at: DateTime) {{ search(query: $q, asOf: $at) {{ {HIT} }} }}",
        {"q": QUESTION, "at": as_of},
    )
    return data["search"]


async def test_a_superseded_fact_is_hidden_now_and_found_as_of_its_time(api: LiveServer) -> None:
    paris = await add_insight(api, PARIS)
    moment = await between(api)
    berlin = await add_insight(api, BERLIN, [paris["id"]])
    assert berlin["supersedes"] == [paris["id"]] and berlin["validTo"] is None

    now = await search(api)
    assert [h["content"] for h in now] == [BERLIN]
    assert now[0]["filteredNow"] is False
    past = await search(api, moment)
    assert [h["content"] for h in past] == [PARIS]
    # the explanation says a search of now would have filtered it, and by what
    assert past[0]["filteredNow"] is True and past[0]["supersededBy"] == berlin["id"]

    shown = await api.data(
        f'{{ insight(id: "{paris["id"]}") {{ validFrom validTo supersededBy }} }}'
    )
    assert shown["insight"]["validTo"] == berlin["validFrom"]
    assert shown["insight"]["supersededBy"] == berlin["id"]

    hits = await api.data(
        'query($at: DateTime) { now: insightSearch(query: "bakery", topK: 5) '
        '{ insight { content } } then: insightSearch(query: "bakery", topK: 5, asOf: $at) '
        "{ insight { content } } }",
        {"at": moment},
    )
    assert [h["insight"]["content"] for h in hits["now"]] == [BERLIN]
    assert [h["insight"]["content"] for h in hits["then"]] == [PARIS]

    listed = await api.data(
        "{ now: insights { edges { node { content } } } "
        "all: insights(includeSuperseded: true) { edges { node { content } } } }"
    )
    assert [e["node"]["content"] for e in listed["now"]["edges"]] == [BERLIN]
    assert [e["node"]["content"] for e in listed["all"]["edges"]] == [BERLIN, PARIS]


async def test_superseding_refuses_closed_unknown_and_future_facts(api: LiveServer) -> None:
    old = await add_insight(api, PARIS)
    await add_insight(api, BERLIN, [old["id"]])
    again = await api.error(
        "mutation($i: InsightInput!) { addInsight(input: $i) { id } }",
        {"i": {"content": "The user moved to Rome", "supersedes": [old["id"]]}},
    )
    assert again["extensions"]["code"] == "BAD_USER_INPUT"
    assert "Already superseded" in again["message"]
    unknown = await api.error(
        'mutation { addInsight(input: {content: "x", supersedes: ["987654"]}) { id } }'
    )
    assert unknown["extensions"]["code"] == "BAD_USER_INPUT"
    future = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    later = await api.error(
        'query($at: DateTime) { search(query: "x", asOf: $at) { id } }', {"at": future}
    )
    assert later["extensions"]["code"] == "BAD_USER_INPUT"
    naive = await api.error('query { search(query: "x", asOf: "2026-01-01T00:00:00") { id } }')
    assert naive["extensions"]["code"] == "BAD_USER_INPUT"
    # nothing was half-written: the refused adds stored nothing
    listed = await api.data("{ insights(includeSuperseded: true) { edges { node { id } } } }")
    assert len(listed["insights"]["edges"]) == 2


async def test_invalidating_an_insight_closes_it_without_a_successor(api: LiveServer) -> None:
    fact = await add_insight(api, PARIS)
    moment = await between(api)
    closed = await api.data(
        f'mutation {{ invalidateInsight(id: "{fact["id"]}") {{ validTo supersededBy }} }}'
    )
    assert closed["invalidateInsight"]["validTo"] is not None
    assert closed["invalidateInsight"]["supersededBy"] is None
    assert await search(api) == []
    assert [h["content"] for h in await search(api, moment)] == [PARIS]
    twice = await api.error(f'mutation {{ invalidateInsight(id: "{fact["id"]}") {{ id }} }}')
    assert twice["extensions"]["code"] == "BAD_USER_INPUT"


async def test_edges_change_and_neighbors_see_them_as_of(api: LiveServer) -> None:
    made = await api.data(
        'mutation { a: addEdge(input: {relation: "LIVES_IN", source: {label: "Person", '
        'name: "user"}, target: {label: "City", name: "Paris"}, createMissing: true}) '
        "{ id sourceId } }"
    )
    paris_edge = made["a"]
    moment = await between(api)
    moved = await api.data(
        'mutation($old: [ID!]!) { addEdge(input: {relation: "LIVES_IN", source: '
        '{label: "Person", name: "user"}, target: {label: "City", name: "Berlin"}, '
        "createMissing: true, supersedes: $old}) { id validFrom supersedes } }",
        {"old": [paris_edge["id"]]},
    )
    berlin_edge = moved["addEdge"]
    assert berlin_edge["supersedes"] == [paris_edge["id"]]

    query = (
        "query($n: ID!, $at: DateTime) { neighbors(nodeId: $n, asOf: $at) "
        "{ node { name } edges { id validTo } } }"
    )
    now = await api.data(query, {"n": paris_edge["sourceId"]})
    assert [n["node"]["name"] for n in now["neighbors"]] == ["Berlin"]
    then = await api.data(query, {"n": paris_edge["sourceId"], "at": moment})
    assert [n["node"]["name"] for n in then["neighbors"]] == ["Paris"]
    assert then["neighbors"][0]["edges"][0]["validTo"] == berlin_edge["validFrom"]

    # the same relation can be drawn again after it was closed: history stays
    again = await api.data(
        'mutation { addEdge(input: {relation: "LIVES_IN", source: {label: "Person", '
        'name: "user"}, target: {label: "City", name: "Paris"}}) { id } }'
    )
    assert again["addEdge"]["id"] != paris_edge["id"]
    closed = await api.data(
        f'mutation {{ invalidateEdge(id: "{berlin_edge["id"]}") {{ validTo }} }}'
    )
    assert closed["invalidateEdge"]["validTo"] is not None
    now = await api.data(query, {"n": paris_edge["sourceId"]})
    assert [n["node"]["name"] for n in now["neighbors"]] == ["Paris"]
    path = await api.data(
        "query($a: ID!, $b: ID!, $at: DateTime) { path(fromId: $a, toId: $b, asOf: $at) "
        "{ nodes { name } } }",
        {"a": paris_edge["sourceId"], "b": (await node_id(api, "City", "Berlin")), "at": moment},
    )
    assert path["path"] is None  # the user did not live in Berlin then
    missing = await api.error('mutation { invalidateEdge(id: "987654") { id } }')
    assert missing["extensions"]["code"] == "NOT_FOUND"


async def node_id(api: LiveServer, label: str, name: str) -> str:
    data = await api.data(
        "query($l: String!, $n: String!) { nodeByName(label: $l, name: $n) { id } }",
        {"l": label, "n": name},
    )
    return data["nodeByName"]["id"]


async def test_similar_valid_insights_are_hinted_never_superseded(api: LiveServer) -> None:
    paris = await add_insight(api, PARIS)
    added = await api.data(
        "mutation($i: InsightInput!) { addInsight(input: $i) { id possiblyContradicts "
        "{ similarity insight { id content } } } }",
        {"i": {"content": "The user lives in Paris, and works at the bakery"}},
    )
    hints = added["addInsight"]["possiblyContradicts"]
    assert [h["insight"]["id"] for h in hints] == [paris["id"]]
    assert 0.85 <= hints[0]["similarity"] <= 1
    still = await api.data(f'{{ insight(id: "{paris["id"]}") {{ validTo }} }}')
    assert still["insight"]["validTo"] is None  # a hint only


async def test_the_same_insight_stored_twice_is_no_contradiction_of_itself(
    api: LiveServer,
) -> None:
    first = await add_insight(api, PARIS)
    again = await api.data(
        "mutation($i: InsightInput!) { addInsight(input: $i) { id possiblyContradicts "
        "{ similarity insight { id } } } }",
        {"i": {"content": PARIS + "."}},
    )
    assert again["addInsight"]["possiblyContradicts"] == []  # a duplicate: consolidate merges
    merged = await api.data("mutation { consolidate { actions { kind targetId ids } } }")
    assert merged["consolidate"]["actions"] == [
        {"kind": "MERGE", "targetId": first["id"], "ids": [again["addInsight"]["id"]]}
    ]


async def test_search_limited_to_a_period_of_raw_turns(api: LiveServer) -> None:
    turns = [
        ("2023-05-08T13:56:00Z", "I went camping by the lake"),
        ("2023-07-02T10:00:00Z", "I went camping in the mountains"),
    ]
    for stamp, content in turns:
        await api.data(
            "mutation($t: RawDialogueInput!) { storeRawDialogue(input: $t) { id } }",
            {"t": {"sessionId": "s", "speaker": "user", "content": content, "timestamp": stamp}},
        )
    found = await api.data(
        'query { search(query: "camping", layers: [RAW], since: "2023-07-01T00:00:00Z", '
        'until: "2023-07-31T23:59:59Z") { content } }'
    )
    assert [h["content"] for h in found["search"]] == ["user: I went camping in the mountains"]
    wrong = await api.error(
        'query { search(query: "camping", since: "2023-08-01T00:00:00Z", '
        'until: "2023-07-01T00:00:00Z") { id } }'
    )
    assert wrong["extensions"]["code"] == "BAD_USER_INPUT"


async def test_search_reads_time_in_the_query(api: LiveServer) -> None:
    turns = [
        ("2023-05-08T13:00:00Z", "The camping trip was great, we did so much on that camping trip"),
        ("2023-07-02T10:00:00Z", "We went camping"),
    ]
    for stamp, content in turns:
        await api.data(
            "mutation($t: RawDialogueInput!) { storeRawDialogue(input: $t) { id } }",
            {"t": {"sessionId": "s", "speaker": "user", "content": content, "timestamp": stamp}},
        )
    query = """query($q: String!, $i: Boolean, $r: DateTime) {
      search(query: $q, layers: [RAW], interpretTime: $i, referenceTime: $r) {
        content rankWithoutPeriod periodRank timeScore
        interpretedPeriod { expression granularity start end until } } }"""
    question = "What did we do on the camping trip in July 2023?"
    plain = await api.data(query, {"q": question})
    assert plain["search"][0]["content"].endswith("on that camping trip")
    assert plain["search"][0]["interpretedPeriod"] is None
    assert plain["search"][0]["timeScore"] is None

    found = await api.data(query, {"q": question, "i": True, "r": "2023-10-01T09:00:00+02:00"})
    first, second = found["search"]
    assert first["content"] == "user: We went camping"
    assert (first["periodRank"], first["rankWithoutPeriod"]) == (1, 2)
    assert (second["periodRank"], second["rankWithoutPeriod"]) == (None, 1)
    assert first["timeScore"] > second["timeScore"]
    period = first["interpretedPeriod"]
    assert "July 2023" in period["expression"] and period["granularity"] == "month"
    # in the reference time's own timezone
    assert period["start"] == "2023-07-01T00:00:00+02:00"
    assert period["end"] == "2023-08-01T00:00:00+02:00"
    assert period["until"] == "2023-08-08T00:00:00+02:00"

    context = await api.data(
        'query($r: DateTime) { context(query: "What did we do on the camping trip in July '
        '2023?", include: [SEARCH], interpretTime: true, referenceTime: $r) '
        "{ sections { items { content reason } } } }",
        {"r": "2023-10-01T09:00:00Z"},
    )
    [section] = context["context"]["sections"]
    assert section["items"][0]["content"].endswith("We went camping")
    assert 'July 2023" = 2023-07-01 to 2023-07-31' in section["items"][0]["reason"]


async def test_a_query_full_of_numbers_reads_no_time_and_says_why(api: LiveServer) -> None:
    """Sixty years (a second of dateparser's work when it was read) are not handed to the
    reader at all: the hits are ranked without a period and say why."""
    await api.data(
        'mutation { storeRawDialogue(input: {sessionId: "s", speaker: "user", '
        'content: "We went camping in 1999", timestamp: "1999-07-02T10:00:00Z"}) { id } }'
    )
    years = " ".join(str(year) for year in range(1990, 2050))
    query = """query($q: String!, $i: Boolean) { search(query: $q, layers: [RAW], interpretTime: $i)
      { content interpretedPeriod { expression } periodNotRead } }"""
    [hit] = (await api.data(query, {"q": years, "i": True}))["search"]
    assert hit["interpretedPeriod"] is None
    assert hit["periodNotRead"] == (
        "time not read: the query holds 60 numbers, more than 8; searched without a period"
    )
    [plain] = (await api.data(query, {"q": years}))["search"]
    assert plain == hit | {"periodNotRead": None}
    [read] = (await api.data(query, {"q": "camping in 1999", "i": True}))["search"]
    assert read["interpretedPeriod"] == {"expression": "in 1999"} and read["periodNotRead"] is None


async def test_a_reference_time_without_a_timezone_is_refused(api: LiveServer) -> None:
    for field in ("search", "context"):
        error = await api.error(
            f'query {{ {field}(query: "what happened yesterday", interpretTime: true, '
            f'referenceTime: "2023-10-01T09:00:00") {{ __typename }} }}'
        )
        assert error["extensions"]["code"] == "BAD_USER_INPUT"
        assert "referenceTime must carry a timezone" in error["message"]
