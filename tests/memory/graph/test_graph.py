"""Graph: idempotent nodes, edges, cycle-safe shortest-distance traversal, shortest paths."""

from __future__ import annotations

import gc
import random

import pytest

from gql_memory import NotFoundError, ValidationError
from gql_memory.memory import Memory
from gql_memory.memory.graph.edges import Edge
from gql_memory.memory.graph.nodes import Node
from gql_memory.memory.graph.traversal import GraphPath
from gql_memory.memory.graph.traversal_sql import NEIGHBORS_SQL, Direction


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


# --- traversal against a reference breadth-first search ------------------------------------

Edges = list[tuple[int, int, int, str]]  # (edge id, source, target, relation)


def reference_levels(
    edges: Edges, start: int, depth: int, direction: str, relation: str | None = None
) -> list[tuple[int, int, list[int], list[int]]]:
    """The documented traversal, naively: level by level, each node once at its shortest
    distance, reached through the lowest-id edge from the level before; nodes of a level in
    id order. Returns (node, distance, path node ids, path edge ids)."""
    parents: dict[int, tuple[int, int]] = {}
    visited, frontier, found = {start}, {start}, []
    for distance in range(1, depth + 1):
        candidates: dict[int, tuple[int, int]] = {}
        for edge_id, source, target, kind in edges:
            if relation is not None and kind != relation:
                continue
            steps = []
            if direction in ("OUT", "BOTH"):
                steps.append((source, target))
            if direction in ("IN", "BOTH"):
                steps.append((target, source))
            for parent, node in steps:
                best = candidates.get(node)
                if parent in frontier and node not in visited and (not best or edge_id < best[1]):
                    candidates[node] = (parent, edge_id)
        if not candidates:
            break
        parents.update(candidates)
        visited |= candidates.keys()
        frontier = set(candidates)
        found += [(node, distance) for node in sorted(candidates)]
    result = []
    for node, distance in found:
        path, path_edges, at = [node], [], node
        while at != start:
            at, edge_id = parents[at]
            path.append(at)
            path_edges.append(edge_id)
        result.append((node, distance, path[::-1], path_edges[::-1]))
    return result


async def random_graph(memory: Memory, seed: int = 12) -> tuple[dict[int, Node], dict[int, Edge]]:
    """A seeded graph with cycles, antiparallel edges, two relations, a few properties and a
    node outside it; returns the nodes and edges as stored, by id."""
    rng = random.Random(seed)
    insight = await memory.insights.add("a linked fact")
    nodes = {}
    for i in range(24):
        node = await memory.graph.add_node(
            "T",
            f"n{i}",
            {"i": i, "tags": ["x", i / 2]} if i % 3 == 0 else None,
            insight_id=insight.id if i % 7 == 0 else None,
        )
        nodes[node.id] = node
    ids, edges = sorted(nodes), {}
    while len(edges) < 60:
        source, target = rng.sample(ids, 2)
        edge = await memory.graph.add_edge(
            source,
            target,
            rng.choice(["causes", "mentions"]),
            weight=rng.choice([1.0, 0.5, 3.0]),
            properties={"k": len(edges)} if len(edges) % 4 == 0 else None,
        )
        edges[edge.id] = edge
    return nodes, edges


@pytest.mark.parametrize("direction", ["OUT", "IN", "BOTH"])
@pytest.mark.parametrize("relation", [None, "causes"])
async def test_neighbors_match_a_reference_search_with_records_as_stored(
    memory: Memory, direction: str, relation: str | None
) -> None:
    nodes, edges = await random_graph(memory)
    flat = [(e.id, e.source_id, e.target_id, e.relation) for e in edges.values()]
    for start in nodes:
        found = await memory.graph.neighbors(start, 3, relation, direction)
        got = [
            (n.node.id, n.distance, [p.id for p in n.path], [e.id for e in n.edges]) for n in found
        ]
        assert got == reference_levels(flat, start, 3, direction, relation)
        for neighbor in found:  # whole records, equal to what was stored
            assert neighbor.node == nodes[neighbor.node.id] == neighbor.path[-1]
            assert neighbor.path == [nodes[p.id] for p in neighbor.path]
            assert neighbor.edges == [edges[e.id] for e in neighbor.edges]


@pytest.mark.parametrize("first", [1, 5, 9])
async def test_first_bounds_the_neighbours_nearest_first_then_by_id(
    memory: Memory, first: int
) -> None:
    """The ``first`` neighbours of the full traversal (nearest first, then by node id), and
    the statement itself returns no more nodes than that."""
    nodes, edges = await random_graph(memory)
    flat = [(e.id, e.source_id, e.target_id, e.relation) for e in edges.values()]
    for start in list(nodes)[:6]:
        found = await memory.graph.neighbors(start, 3, first=first)
        got = [(n.node.id, n.distance, [p.id for p in n.path]) for n in found]
        expected = [(n, d, p) for n, d, p, _ in reference_levels(flat, start, 3, "BOTH")]
        assert got == expected[:first]
        statement = NEIGHBORS_SQL[Direction.BOTH, False, False]
        async with memory.db.read() as conn:
            levels = await statement.fetch(
                conn, start=start, ns=memory.namespace, max_depth=3, first=first
            )
        assert sum(len(level["node_ids"]) for level in levels[1:]) == len(got)


async def test_neighbors_default_to_a_page_and_refuse_more_than_the_largest(
    memory: Memory,
) -> None:
    settings = memory.settings.with_overrides(default_page_size=3, max_page_size=4)
    small = Memory(memory.db, settings)
    hub = await small.graph.add_node("T", "hub")
    for i in range(6):
        await small.graph.add_edge(hub.id, (await small.graph.add_node("T", f"s{i}")).id, "r")
    assert [n.node.name for n in await small.graph.neighbors(hub.id)] == ["s0", "s1", "s2"]
    assert len(await small.graph.neighbors(hub.id, first=4)) == 4
    for first in (0, 5):
        with pytest.raises(ValidationError, match="first must be between 1 and 4"):
            await small.graph.neighbors(hub.id, first=first)


async def test_shortest_paths_match_a_reference_search(memory: Memory) -> None:
    nodes, edges = await random_graph(memory)
    flat = [(e.id, e.source_id, e.target_id, e.relation) for e in edges.values()]
    lengths = set()
    for start in nodes:
        expected = {n: (p, e) for n, _, p, e in reference_levels(flat, start, 5, "BOTH")}
        for goal in nodes:
            path = await memory.graph.path(start, goal)
            if goal == start:
                assert path == GraphPath(nodes=[nodes[start]], edges=[])
            elif goal not in expected:
                assert path is None
            else:
                assert path is not None
                assert ([n.id for n in path.nodes], [e.id for e in path.edges]) == expected[goal]
                assert path.nodes == [nodes[n.id] for n in path.nodes]
                assert path.edges == [edges[e.id] for e in path.edges]
                lengths.add(path.length)
                if path.length > 1:
                    assert await memory.graph.path(start, goal, max_depth=path.length - 1) is None
    assert {1, 2, 3} <= lengths  # direct, two-hop and longer searches were all exercised


async def test_traversals_stay_in_their_namespace(memory: Memory) -> None:
    ids = await chain(memory, "abc")
    other = Memory(memory.db, memory.settings, namespace="elsewhere")
    assert await other.graph.neighbors(ids["a"], depth=2) == []
    assert await other.graph.path(ids["a"], ids["c"]) is None
    assert await other.graph.path(ids["a"], ids["a"]) is None


@pytest.mark.parametrize("enabled", [True, False])
async def test_a_traversal_leaves_the_garbage_collector_as_it_was(
    memory: Memory, enabled: bool
) -> None:
    ids = await chain(memory, "abcd")
    if not enabled:
        gc.disable()
    try:
        assert len(await memory.graph.neighbors(ids["a"], depth=3)) == 3
        assert gc.isenabled() is enabled
    finally:
        gc.enable()
