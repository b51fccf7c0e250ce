"""LangGraph's BaseStore over graph nodes and insights: conformance cases written from
BaseStore's documented semantics (LangGraph ships no store conformance suite), and a
StateGraph compiled with store= that reads what an earlier run wrote."""

from __future__ import annotations

from typing import Any, TypedDict

import pytest
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, InvalidNamespaceError

from gql_memory import AsyncMemoryStore, MemoryStore
from gql_memory.config import Settings
from gql_memory.integrations.langgraph import LangGraphStore

USER = ("users", "u1")


@pytest.fixture
def lg(async_store: AsyncMemoryStore) -> LangGraphStore:
    return LangGraphStore(async_store)


async def test_put_get_update_delete(lg: LangGraphStore) -> None:
    assert isinstance(lg, BaseStore)
    assert await lg.aget(USER, "theme") is None
    await lg.aput(USER, "theme", {"text": "User prefers dark mode", "n": 1})
    first = await lg.aget(USER, "theme")
    assert first is not None
    assert (first.namespace, first.key, first.value) == (USER, "theme", first.value)
    assert first.value == {"text": "User prefers dark mode", "n": 1}
    await lg.aput(USER, "theme", {"text": "User prefers light mode", "n": 2})
    second = await lg.aget(USER, "theme")
    assert second is not None and second.value["n"] == 2
    assert second.created_at == first.created_at
    assert second.updated_at >= first.updated_at
    assert await lg.aget(("users", "u2"), "theme") is None  # namespaces are apart
    await lg.adelete(USER, "theme")
    assert await lg.aget(USER, "theme") is None
    await lg.adelete(USER, "theme")  # deleting what is not there is no error


async def test_search_with_a_query_ranks_by_our_hybrid_search(
    lg: LangGraphStore, async_store: AsyncMemoryStore
) -> None:
    await lg.aput(USER, "theme", {"text": "User prefers dark mode in the editor"})
    await lg.aput(USER, "food", {"text": "User is allergic to peanuts"})
    await lg.aput(("users", "u2"), "food", {"text": "Another user likes peanuts"})
    hits = await lg.asearch(("users", "u1"), query="peanuts allergy")
    assert [h.key for h in hits][0] == "food"
    assert all(h.namespace == USER for h in hits)
    assert hits[0].score is not None and hits[0].score > 0
    everyone = await lg.asearch(("users",), query="peanuts")
    assert {(h.namespace, h.key) for h in everyone} >= {(USER, "food"), (("users", "u2"), "food")}
    # the items' texts (the whole value by default) are insights of the namespace, which
    # the rest of the API sees too
    found = await async_store.search("peanuts allergy", session_id=None)
    assert '{"text": "User is allergic to peanuts"}' in [h.content for h in found]


async def test_an_update_supersedes_the_old_text(lg: LangGraphStore) -> None:
    await lg.aput(USER, "city", {"text": "User lives in Berlin"})
    await lg.aput(USER, "city", {"text": "User lives in Lisbon"})
    [hit] = await lg.asearch(USER, query="Berlin Lisbon", limit=5)
    assert hit.value == {"text": "User lives in Lisbon"}


async def test_index_false_and_index_fields(lg: LangGraphStore) -> None:
    await lg.aput(USER, "secret", {"text": "peanuts"}, index=False)
    await lg.aput(USER, "tagged", {"text": "nothing here", "tags": "peanuts"}, index=["tags"])
    hits = await lg.asearch(USER, query="peanuts")
    assert [h.key for h in hits] == ["tagged"]
    assert await lg.aget(USER, "secret") is not None  # not searchable, still stored
    listed = await lg.asearch(USER)  # without a query: every item, filtered
    assert {h.key for h in listed} == {"secret", "tagged"}
    await lg.aput(USER, "tagged", {"text": "now unindexed"}, index=False)
    assert await lg.asearch(USER, query="peanuts") == []


async def test_filters_offsets_and_limits(lg: LangGraphStore) -> None:
    for i in range(5):
        value = {"n": i, "kind": "even" if i % 2 == 0 else "odd", "meta": {"lang": "en"}}
        await lg.aput(("docs",), f"d{i}", value)
    newest_first = [h.key for h in await lg.asearch(("docs",))]
    assert newest_first == ["d4", "d3", "d2", "d1", "d0"]
    assert [h.key for h in await lg.asearch(("docs",), limit=2, offset=1)] == ["d3", "d2"]
    even = await lg.asearch(("docs",), filter={"kind": "even"})
    assert [h.key for h in even] == ["d4", "d2", "d0"]
    assert [h.key for h in await lg.asearch(("docs",), filter={"n": {"$gt": 2}})] == ["d4", "d3"]
    ranged = await lg.asearch(("docs",), filter={"n": {"$gte": 1, "$lt": 3}})
    assert [h.key for h in ranged] == ["d2", "d1"]
    assert len(await lg.asearch(("docs",), filter={"kind": {"$ne": "even"}})) == 2
    assert len(await lg.asearch(("docs",), filter={"meta": {"lang": "en"}})) == 5
    assert await lg.asearch(("docs",), filter={"missing": 1}) == []
    queried = await lg.asearch(("docs",), query="even", filter={"kind": "odd"})
    assert {h.key for h in queried} <= {"d1", "d3"}


async def test_list_namespaces(lg: LangGraphStore) -> None:
    for namespace in [("a", "b", "c"), ("a", "b", "d"), ("a", "x"), ("z", "b")]:
        await lg.aput(namespace, "k", {"v": 1}, index=False)
    assert await lg.alist_namespaces() == [("a", "b", "c"), ("a", "b", "d"), ("a", "x"), ("z", "b")]
    assert await lg.alist_namespaces(prefix=("a", "b")) == [("a", "b", "c"), ("a", "b", "d")]
    assert await lg.alist_namespaces(prefix=("a", "*", "d")) == [("a", "b", "d")]
    assert await lg.alist_namespaces(suffix=("b",)) == [("z", "b")]
    assert await lg.alist_namespaces(max_depth=2) == [("a", "b"), ("a", "x"), ("z", "b")]
    assert await lg.alist_namespaces(limit=2, offset=1) == [("a", "b", "d"), ("a", "x")]


async def test_invalid_namespaces_and_ttl_are_refused(lg: LangGraphStore) -> None:
    with pytest.raises(InvalidNamespaceError):
        await lg.aput(("a.b",), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        await lg.aput((), "k", {"v": 1})
    assert lg.supports_ttl is False
    with pytest.raises(NotImplementedError):
        await lg.aput(USER, "k", {"v": 1}, ttl=5.0)


async def test_batch_runs_operations_in_order(lg: LangGraphStore) -> None:
    from langgraph.store.base import GetOp, PutOp, SearchOp

    results = await lg.abatch(
        [
            PutOp(USER, "a", {"v": 1}),
            GetOp(USER, "a"),
            PutOp(USER, "a", None),
            GetOp(USER, "a"),
            SearchOp(USER),
        ]
    )
    assert results[0] is None and results[2] is None
    assert results[1] is not None and results[1].value == {"v": 1}  # type: ignore[union-attr]
    assert results[3] is None and results[4] == []


async def test_synchronous_methods_need_a_synchronous_store(lg: LangGraphStore) -> None:
    with pytest.raises(TypeError, match="MemoryStore"):
        lg.get(USER, "a")


class Chat(TypedDict):
    user: str
    message: str
    remembered: list[str]


def remember(state: Chat) -> dict[str, Any]:
    """A node: what the store holds for this user, then the new message stored."""
    store = get_store()
    namespace = ("memories", state["user"])
    known = [item.value["text"] for item in store.search(namespace, query=state["message"])]
    store.put(namespace, f"m{len(known)}", {"text": state["message"]})
    return {"remembered": known}


def chat_graph(store: BaseStore) -> Any:
    builder = StateGraph(Chat)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", END)
    return builder.compile(store=store)


def test_a_state_graph_reads_what_an_earlier_run_wrote(
    store_settings: Settings, namespace: str
) -> None:
    def run(message: str) -> list[str]:
        with MemoryStore(settings=store_settings, namespace=namespace, migrate=False) as store:
            graph = chat_graph(LangGraphStore(store))
            state = graph.invoke({"user": "u1", "message": message, "remembered": []})
            return list(state["remembered"])

    assert run("I live in Lisbon and cycle to work") == []
    assert run("Where do I live?") == ["I live in Lisbon and cycle to work"]
    with MemoryStore(settings=store_settings, namespace=namespace, migrate=False) as store:
        assert len(LangGraphStore(store).search(("memories", "u1"))) == 2


async def test_nodes_written_otherwise_under_the_label_are_not_items(
    lg: LangGraphStore, async_store: AsyncMemoryStore
) -> None:
    await async_store.graph.add_node("langgraph:users.u1", "stray", {"note": "by hand"})
    assert await lg.aget(USER, "stray") is None
    assert await lg.asearch(USER) == []
    await lg.aput(USER, "stray", {"v": 1})  # a put takes the node over
    item = await lg.aget(USER, "stray")
    assert item is not None and item.value == {"v": 1}


async def test_insights_with_other_langgraph_metadata_are_not_items(
    lg: LangGraphStore, async_store: AsyncMemoryStore
) -> None:
    await lg.aput(USER, "food", {"text": "User is allergic to peanuts"})
    # any writer can set an insight's metadata (addInsight, MCP): shapes this store never wrote
    for metadata in (
        {"langgraph": "x"},
        {"langgraph": ["users", "u1"]},
        {"langgraph": {}},
        {"langgraph": {"key": "food"}},
        {"langgraph": {"namespace": ["users", "u1"]}},
        {"langgraph": {"namespace": 5, "key": "food"}},
        {"langgraph": {"namespace": "users", "key": "food"}},
        {"langgraph": {"namespace": ["users", 1], "key": "food"}},
        {"langgraph": {"namespace": [], "key": "food"}},
        {"langgraph": {"namespace": ["users", "u1"], "key": []}},
        {"langgraph": {"namespace": ["users", "u1"], "key": " "}},
        {"langgraph": {"namespace": ["users", "u1"], "key": "food"}},  # not the item's text
    ):
        await async_store.insights.add("Peanuts again", metadata=metadata)
    # and nodes under the label whose times are not this store's (not a moment, no offset)
    for key, moment in (("stray", "yesterday"), ("naive", "2024-01-01T00:00:00")):
        times = {"value": {}, "created_at": moment, "updated_at": moment}
        await async_store.graph.add_node("langgraph:users.u1", key, times)

    hits = await lg.asearch(USER, query="peanuts")
    assert [(h.namespace, h.key) for h in hits] == [(USER, "food")]
    assert [h.key for h in await lg.asearch(USER)] == ["food"]
    item = await lg.aget(USER, "food")
    assert item is not None and item.value == {"text": "User is allergic to peanuts"}
    assert await lg.aget(USER, "stray") is None and await lg.aget(USER, "naive") is None
    assert await lg.alist_namespaces() == [USER]
