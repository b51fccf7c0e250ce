"""Graph: idempotent nodes, edges, cycle-safe shortest-distance traversal, shortest paths."""

from __future__ import annotations

import pytest

from gql_memory import NotFoundError, ValidationError
from gql_memory.memory import Memory
from gql_memory.memory.graph import Direction


async def chain(memory: Memory, names: str, relation: str = "next") -> dict[str, int]:
    """Nodes named by the letters of ``names`` linked a->b->c...; returns name -> id."""
    ids = {n: (await memory.graph.add_node("T", n)).id for n in names}
    for a, b in zip(names, names[1:], strict=False):
        await memory.graph.add_edge(ids[a], ids[b], relation)
    return ids


def by_name(neighbors) -> dict[str, int]:  # type: ignore[no-untyped-def]
    return {n.node.name: n.distance for n in neighbors}


async def test_add_node_is_idempotent_on_label_and_name(memory: Memory) -> None:
    first = await memory.graph.add_node("Person", "Ada", {"born": 1815})
    again = await memory.graph.add_node("Person", "Ada")
    assert again.id == first.id and again.properties == {"born": 1815}
    updated = await memory.graph.add_node("Person", "Ada", {"born": 1816})
    assert updated.properties == {"born": 1816}
    assert (await memory.graph.node_by_name("Person", "Ada")) == updated
    other = await memory.graph.add_node("City", "Ada")
    assert other.id != first.id


async def test_node_links_an_insight(memory: Memory) -> None:
    insight = await memory.insights.add("Ada wrote the first program")
    node = await memory.graph.add_node("Fact", "first program", insight_id=insight.id)
    assert node.insight_id == insight.id
    with pytest.raises(ValidationError, match="insight_id 99999 does not exist"):
        await memory.graph.add_node("Fact", "ghost", insight_id=99999)


async def test_edges_by_id_and_by_label_name(memory: Memory) -> None:
    ids = await chain(memory, "ab")
    edge = await memory.graph.add_edge(("T", "a"), ("T", "b"), "next", weight=0.5)
    assert (edge.source_id, edge.target_id, edge.weight) == (ids["a"], ids["b"], 0.5)
    with pytest.raises(ValidationError, match="does not exist"):
        await memory.graph.add_edge(("T", "a"), ("T", "zz"), "next")
    created = await memory.graph.add_edge(("T", "a"), ("T", "zz"), "next", create_missing=True)
    assert (await memory.graph.node_by_name("T", "zz")).id == created.target_id  # type: ignore[union-attr]
    with pytest.raises(NotFoundError):
        await memory.graph.add_edge(ids["a"], 999_999, "next")


async def test_self_loops_are_rejected(memory: Memory) -> None:
    node = await memory.graph.add_node("T", "a")
    with pytest.raises(ValidationError, match="self-loop"):
        await memory.graph.add_edge(node.id, node.id, "likes")


async def test_chain_neighbors_by_depth(memory: Memory) -> None:
    ids = await chain(memory, "abcdefg")
    assert by_name(await memory.graph.neighbors(ids["a"])) == {"b": 1}
    assert by_name(await memory.graph.neighbors(ids["a"], depth=3)) == {"b": 1, "c": 2, "d": 3}
    five = await memory.graph.neighbors(ids["a"], depth=5)
    assert by_name(five) == {"b": 1, "c": 2, "d": 3, "e": 4, "f": 5}
    f = next(n for n in five if n.node.name == "f")
    assert [n.name for n in f.path] == list("abcdef") and len(f.edges) == 5


@pytest.mark.parametrize("depth", [0, 6, -1])
async def test_depth_bounds(memory: Memory, depth: int) -> None:
    node = await memory.graph.add_node("T", "a")
    with pytest.raises(ValidationError, match="depth must be an integer between 1 and 5"):
        await memory.graph.neighbors(node.id, depth=depth)


async def test_cycles_terminate_and_list_each_node_once(memory: Memory) -> None:
    ids = await chain(memory, "abc")
    await memory.graph.add_edge(ids["c"], ids["a"], "next")  # a -> b -> c -> a
    result = await memory.graph.neighbors(ids["a"], depth=5)
    assert by_name(result) == {"b": 1, "c": 1}  # c is one hop away backwards (BOTH)
    out = await memory.graph.neighbors(ids["a"], depth=5, direction=Direction.OUT)
    assert by_name(out) == {"b": 1, "c": 2}


async def test_diamond_reaches_the_far_node_once_at_shortest_distance(memory: Memory) -> None:
    ids = {n: (await memory.graph.add_node("T", n)).id for n in "abcd"}
    for a, b in ["ab", "ac", "bd", "cd"]:
        await memory.graph.add_edge(ids[a], ids[b], "to")
    result = await memory.graph.neighbors(ids["a"], depth=3, direction="OUT")
    assert by_name(result) == {"b": 1, "c": 1, "d": 2}
    assert len(result) == 3


async def test_direction_and_relation_filters(memory: Memory) -> None:
    ids = {n: (await memory.graph.add_node("T", n)).id for n in "abc"}
    await memory.graph.add_edge(ids["a"], ids["b"], "causes")
    await memory.graph.add_edge(ids["c"], ids["a"], "mentions")
    assert by_name(await memory.graph.neighbors(ids["a"], direction="OUT")) == {"b": 1}
    assert by_name(await memory.graph.neighbors(ids["a"], direction="IN")) == {"c": 1}
    assert by_name(await memory.graph.neighbors(ids["a"])) == {"b": 1, "c": 1}
    assert by_name(await memory.graph.neighbors(ids["a"], relation="mentions")) == {"c": 1}
    assert await memory.graph.neighbors(ids["a"], relation="unknown") == []


async def test_shortest_path_and_disconnected_graph(memory: Memory) -> None:
    ids = await chain(memory, "abcde")
    await memory.graph.add_edge(ids["a"], ids["d"], "shortcut")
    path = await memory.graph.path(ids["a"], ids["e"])
    assert path is not None and [n.name for n in path.nodes] == ["a", "d", "e"]
    assert path.length == 2 and [e.relation for e in path.edges] == ["shortcut", "next"]
    backwards = await memory.graph.path(ids["e"], ids["a"])
    assert backwards is not None and backwards.length == 2
    island = await memory.graph.add_node("T", "island")
    assert await memory.graph.path(ids["a"], island.id) is None
    assert await memory.graph.path(ids["a"], ids["e"], max_depth=1) is None


async def test_deleting_a_node_deletes_its_edges(memory: Memory) -> None:
    ids = await chain(memory, "abc")
    assert await memory.graph.delete_node(ids["b"]) is True
    assert await memory.graph.neighbors(ids["a"], depth=5) == []
    assert (await memory.stats()).edges == 0
    assert await memory.graph.delete_node(ids["b"]) is False


async def test_oversized_node_keys_are_bad_input(memory: Memory) -> None:
    with pytest.raises(ValidationError, match="at most 2400 bytes"):
        await memory.graph.add_node("T", "é" * 1300)
    node = await memory.graph.add_node("T", "n" * 2000)
    assert len(node.name) == 2000
