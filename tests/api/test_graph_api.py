"""The graph over HTTP: upserts, edges by key, neighbors with paths, shortest path."""

from __future__ import annotations

from tests.conftest import LiveServer

EDGE = (
    "mutation($i: EdgeInput!) { addEdge(input: $i) { id relation weight "
    "source { name } target { name } } }"
)


async def test_graph_round_trip(api: LiveServer) -> None:
    ada = await api.data(
        'mutation { addNode(input: {label: "Person", name: "Ada", properties: {born: 1815}}) '
        "{ id label name properties } }"
    )
    ada_id = ada["addNode"]["id"]
    again = await api.data('mutation { addNode(input: {label: "Person", name: "Ada"}) { id } }')
    assert again["addNode"]["id"] == ada_id
    edge = await api.data(
        EDGE,
        {
            "i": {
                "source": {"label": "Person", "name": "Ada"},
                "target": {"label": "Machine", "name": "Analytical Engine"},
                "relation": "programmed",
                "createMissing": True,
            }
        },
    )
    assert edge["addEdge"]["target"] == {"name": "Analytical Engine"}
    await api.data(
        EDGE,
        {
            "i": {
                "source": {"label": "Person", "name": "Babbage"},
                "target": {"label": "Machine", "name": "Analytical Engine"},
                "relation": "designed",
                "weight": 2.0,
                "createMissing": True,
            }
        },
    )
    found = await api.data(
        "query($id: ID!) { neighbors(nodeId: $id, depth: 2) { distance node { name } "
        "path { name } edges { relation } } }",
        {"id": ada_id},
    )
    assert {(n["node"]["name"], n["distance"]) for n in found["neighbors"]} == {
        ("Analytical Engine", 1),
        ("Babbage", 2),
    }
    babbage = next(n for n in found["neighbors"] if n["node"]["name"] == "Babbage")
    assert [p["name"] for p in babbage["path"]] == ["Ada", "Analytical Engine", "Babbage"]
    assert [e["relation"] for e in babbage["edges"]] == ["programmed", "designed"]
    babbage_id = (
        await api.data('{ nodeByName(label: "Person", name: "Babbage") { id edges { weight } } }')
    )["nodeByName"]
    assert babbage_id["edges"] == [{"weight": 2.0}]
    path = await api.data(
        "query($a: ID!, $b: ID!) { path(fromId: $a, toId: $b) { length nodes { name } } }",
        {"a": ada_id, "b": babbage_id["id"]},
    )
    assert path["path"]["length"] == 2
    listed = await api.data('{ nodes(label: "Machine") { edges { node { name edges { id } } } } }')
    [machine] = listed["nodes"]["edges"]
    assert len(machine["node"]["edges"]) == 2
    assert (await api.data(f'mutation {{ deleteNode(id: "{ada_id}") }}')) == {"deleteNode": True}
    assert (await api.data(f'{{ node(id: "{ada_id}") {{ id }} }}')) == {"node": None}


async def test_graph_errors(api: LiveServer) -> None:
    node = await api.data('mutation { addNode(input: {label: "T", name: "x"}) { id } }')
    node_id = node["addNode"]["id"]
    error = await api.error(
        EDGE, {"i": {"sourceId": node_id, "targetId": node_id, "relation": "r"}}
    )
    assert error["extensions"]["code"] == "BAD_USER_INPUT" and "self-loop" in error["message"]
    error = await api.error(EDGE, {"i": {"sourceId": node_id, "relation": "r"}})
    assert error["message"] == "Give exactly one of targetId and target"
    error = await api.error(
        "query($id: ID!) { neighbors(nodeId: $id, depth: 9) { distance } }", {"id": node_id}
    )
    assert error["message"] == "depth must be an integer between 1 and 5"
    error = await api.error(
        EDGE, {"i": {"sourceId": node_id, "targetId": "424242", "relation": "r"}}
    )
    assert error["extensions"]["code"] == "NOT_FOUND"


async def test_node_edges_are_bounded_per_node(api: LiveServer) -> None:
    hub = (await api.data('mutation { addNode(input: {label: "T", name: "hub"}) { id } }'))[
        "addNode"
    ]["id"]
    for i in range(5):
        await api.data(
            f'mutation {{ addEdge(input: {{sourceId: "{hub}", target: {{label: "T", '
            f'name: "leaf {i}"}}, relation: "r", createMissing: true}}) {{ id }} }}'
        )
    data = await api.data(
        f'{{ node(id: "{hub}") {{ few: edges(first: 2) {{ target {{ name }} }} '
        "all: edges { id } } }"
    )
    assert [e["target"]["name"] for e in data["node"]["few"]] == ["leaf 0", "leaf 1"]
    assert len(data["node"]["all"]) == 5
    error = await api.error(f'{{ node(id: "{hub}") {{ edges(first: 5000) {{ id }} }} }}')
    assert error["message"] == "first must be between 1 and 1000"


async def test_neighbors_are_bounded_by_first_nearest_first(api: LiveServer) -> None:
    hub = (await api.data('mutation { addNode(input: {label: "T", name: "hub"}) { id } }'))[
        "addNode"
    ]["id"]
    for i in range(4):
        await api.data(
            f'mutation {{ addEdge(input: {{sourceId: "{hub}", target: {{label: "T", '
            f'name: "leaf {i}"}}, relation: "r", createMissing: true}}) {{ id }} }}'
        )
    query = (
        "query($id: ID!, $n: Int) { neighbors(nodeId: $id, depth: 2, first: $n) { node { name } } }"
    )
    found = await api.data(query, {"id": hub, "n": 2})
    assert [n["node"]["name"] for n in found["neighbors"]] == ["leaf 0", "leaf 1"]
    assert len((await api.data(query, {"id": hub}))["neighbors"]) == 4  # a default page
    error = await api.error(query, {"id": hub, "n": 1001})
    assert error["message"] == "first must be between 1 and 1000"
