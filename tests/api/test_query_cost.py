"""The query cost limit (issue 11's second reproducer): nested connections multiply."""

from __future__ import annotations

from tests.conftest import LiveServer

FRAGMENT = "fragment F on Node { edges(first: 1000) { source { id name } target { id name } } }"
REPRODUCER = (
    "{ "
    + " ".join(f"a{i}: nodes(first: 1000) {{ edges {{ node {{ ...F }} }} }}" for i in range(30))
    + " } "
    + FRAGMENT
)


async def test_the_nested_connections_reproducer_is_refused_before_it_runs(
    api: LiveServer,
) -> None:
    error = await api.error(REPRODUCER)
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert error["message"].startswith("Query cost 180090030 exceeds the limit of 200000")


async def test_every_response_reports_its_cost(api: LiveServer) -> None:
    response = await api.client.post(
        "/graphql",
        json={"query": "{ nodes(first: 50) { edges { node { id name } } } stats { sessions } }"},
    )
    body = response.json()
    assert "errors" not in body
    # nodes 1 + 50 x (edges 1 + node 1 + id 1 + name 1), stats 1 + sessions 1
    assert body["extensions"]["cost"] == {"requested": 1 + 50 * 4 + 2, "limit": 200_000}


async def test_variables_count_as_sent(api: LiveServer) -> None:
    query = "query($n: Int) { nodes(first: $n) { edges { node { id } } } }"
    small = await api.client.post("/graphql", json={"query": query, "variables": {"n": 10}})
    assert small.json()["extensions"]["cost"]["requested"] == 1 + 10 * 3
    page = await api.client.post("/graphql", json={"query": query, "variables": {}})
    assert page.json()["extensions"]["cost"]["requested"] == 1 + 100 * 3  # the default page


async def test_fragments_that_spread_each_other_are_measured_once(api: LiveServer) -> None:
    """2^25 paths to expand; GraphQL merges them into one field, and so does the cost."""
    fragments = (
        " ".join(f"fragment F{i} on Node {{ ...F{i + 1} ...F{i + 1} }}" for i in range(25))
        + " fragment F25 on Node { id }"
    )
    response = await api.client.post(
        "/graphql", json={"query": "{ nodes(first: 1) { edges { node { ...F0 } } } } " + fragments}
    )
    assert response.json()["extensions"]["cost"]["requested"] == 1 + 1 * 3


SEARCH = "query($q: String!) { search(query: $q, topK: 1) { id } }"


async def test_query_words_are_charged(api: LiveServer) -> None:
    """A search's cost grows with the distinct words of its query (1 per 4), read from the
    value sent whether it came as a variable or inline; repeated words count once."""
    costs = {}
    for words in (4, 40, 120):
        query = " ".join(f"word{i}" for i in range(words)) + " word0 word1"
        response = await api.client.post(
            "/graphql", json={"query": SEARCH, "variables": {"q": query}}
        )
        costs[words] = response.json()["extensions"]["cost"]["requested"]
    assert costs[40] - costs[4] == 9 and costs[120] - costs[40] == 20
    inline = await api.client.post(
        "/graphql", json={"query": '{ search(query: "a b c d e f g h i", topK: 1) { id } }'}
    )
    assert inline.json()["extensions"]["cost"]["requested"] == costs[4] + 2


async def test_a_query_of_too_many_words_is_refused_before_any_search(api: LiveServer) -> None:
    query = " ".join(f"w{i}" for i in range(1500))  # 7,389 characters, like the issue's
    body = await api.client.post("/graphql", json={"query": SEARCH, "variables": {"q": query}})
    error = body.json()["errors"][0]
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert error["message"].startswith("query has 1500 distinct words; at most 128 are searched")


NEIGHBORS = (
    "neighbors(nodeId: $id, depth: 5, first: 1000) "
    "{ distance node { id name } path { id name } edges { relation } }"
)


async def test_thirty_aliases_of_the_largest_neighbors_are_refused_by_their_cost(
    api: LiveServer,
) -> None:
    """Each alias may return 1,000 neighbours with their paths: 1 + 1000 x (distance 1 +
    node 3 + path 1 + 6 x 2 + edges 1 + 5 x 1) = 23,001, thirty of them 690,030."""
    query = "query($id: ID!) { " + " ".join(f"a{i}: {NEIGHBORS}" for i in range(30)) + " }"
    error = await api.error(query, {"id": "1"})
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert error["message"].startswith("Query cost 690030 exceeds the limit of 200000")


async def test_reading_time_is_charged(api: LiveServer) -> None:
    """A search or context that reads time in its query costs TIME_READING_COST (100) more,
    asked inline or by a variable; false, or the server's default (off), costs nothing."""
    costs = {}
    for field in ("search", "context"):
        selection = "{ id }" if field == "search" else "{ text }"
        query = (
            f'query($i: Boolean) {{ {field}(query: "what happened last week", '
            f"interpretTime: $i) {selection} }}"
        )
        for value in (None, False, True):
            response = await api.client.post(
                "/graphql", json={"query": query, "variables": {"i": value}}
            )
            costs[field, value] = response.json()["extensions"]["cost"]["requested"]
        inline = query.replace("interpretTime: $i", "interpretTime: true").replace(
            "query($i: Boolean) ", ""
        )
        response = await api.client.post("/graphql", json={"query": inline})
        costs[field, "inline"] = response.json()["extensions"]["cost"]["requested"]
    for field in ("search", "context"):
        assert costs[field, None] == costs[field, False]
        assert costs[field, True] == costs[field, "inline"] == costs[field, False] + 100
