"""LangGraph's ``BaseStore`` over graph nodes and insights (extra ``langgraph``).

    store = LangGraphStore(memory_store)        # a MemoryStore, or an AsyncMemoryStore (async)
    graph = builder.compile(store=store)

Everything lives in the memory store's namespace (the tenant); a LangGraph namespace tuple
is a prefix inside it. An item is a graph node: label ``langgraph:`` + the tuple joined with
``.`` (LangGraph forbids ``.`` in its labels, so the mapping is one to one), name = the key,
properties = the value and its times. An item put with ``index`` (by default the whole
value) also gets an insight holding its text, linked to the node: ``search(query=...)`` is
our hybrid search with semantic ranking over those insights, and ``context`` and the
GraphQL API see them too. Putting an item again supersedes its insight (the old text stays
in the history, as facts that change); deleting it deletes the node and closes its insight.
No TTL (``supports_ttl`` is False: LangGraph refuses ``ttl=``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    get_text_at_path,
    validate_op_namespace,
)

from gql_memory.errors import ValidationError
from gql_memory.integrations.bridge import Store, StoreBridge
from gql_memory.memory.graph.nodes import Node
from gql_memory.memory.search.types import MemoryLayer
from gql_memory.store import AsyncMemoryStore

LABEL_PREFIX = "langgraph:"
METADATA_KEY = "langgraph"  # an insight's metadata: {"langgraph": {"namespace", "key"}}
WHOLE_VALUE = "$"
PAGE = 1000  # the graph's largest page
MAX_CANDIDATES = 100  # the most hits one hybrid search returns


def label_of(namespace: tuple[str, ...]) -> str:
    return LABEL_PREFIX + ".".join(namespace)


def namespace_of(label: str) -> tuple[str, ...] | None:
    """The LangGraph namespace of a node label; None for nodes that are not items."""
    if not label.startswith(LABEL_PREFIX):
        return None
    return tuple(label.removeprefix(LABEL_PREFIX).split("."))


def moment_of(value: Any) -> datetime | None:
    """An aware moment written as ``datetime.isoformat`` writes it; None for anything else."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def is_item(node: Node) -> bool:
    """A node this store wrote (another writer's node under our label prefix is skipped)."""
    properties = node.properties or {}
    return (
        namespace_of(node.label) is not None
        and isinstance(properties.get("value"), dict)
        and moment_of(properties.get("created_at")) is not None
        and moment_of(properties.get("updated_at")) is not None
    )


def reference_of(metadata: dict[str, Any] | None) -> tuple[tuple[str, ...], str] | None:
    """The (namespace, key) of the item whose text an insight is, from its metadata as
    ``_put`` writes it; None for any other insight (another writer may set ``langgraph``
    metadata of any shape through addInsight or MCP)."""
    reference = (metadata or {}).get(METADATA_KEY)
    if not isinstance(reference, dict):
        return None
    namespace, key = reference.get("namespace"), reference.get("key")
    if not isinstance(namespace, list) or not namespace or not isinstance(key, str):
        return None
    if not all(isinstance(label, str) and label for label in namespace) or not key.strip():
        return None
    return tuple(namespace), key


def item_of(node: Node, score: float | None = None) -> SearchItem:
    namespace = namespace_of(node.label)
    assert namespace is not None
    properties = node.properties or {}
    return SearchItem(
        namespace=namespace,
        key=node.name,
        value=properties["value"],
        created_at=datetime.fromisoformat(properties["created_at"]),  # checked by is_item
        updated_at=datetime.fromisoformat(properties["updated_at"]),
        score=score,
    )


def plain(item: SearchItem) -> Item:
    return Item(
        value=item.value,
        key=item.key,
        namespace=item.namespace,
        created_at=item.created_at,
        updated_at=item.updated_at,
    )


def text_of(value: dict[str, Any], fields: Sequence[str]) -> str:
    """The text an item is searched by: the texts at the fields' paths (LangGraph's syntax;
    ``$`` is the whole value as JSON, as LangGraph's own stores embed it), one a line."""
    texts = [t for field in fields for t in get_text_at_path(value, field)]
    return "\n".join(t for t in texts if t.strip())


def matches(value: Any, wanted: Any) -> bool:
    """LangGraph's filter semantics: equality (nested objects key by key, lists whole) and
    the operators $eq, $ne, $gt, $gte, $lt, $lte."""
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(compare(value, op, operand) for op, operand in wanted.items())
        return isinstance(value, dict) and all(matches(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(wanted)
            and all(matches(v, w) for v, w in zip(value, wanted, strict=True))
        )
    return bool(value == wanted)


def compare(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(value == operand)
    if operator == "$ne":
        return bool(value != operand)
    if value is None or isinstance(value, dict | list):
        return False
    try:
        left, right = float(value), float(operand)
    except (TypeError, ValueError):
        return False
    if operator == "$gt":
        return left > right
    if operator == "$gte":
        return left >= right
    if operator == "$lt":
        return left < right
    if operator == "$lte":
        return left <= right
    raise ValueError(f"Unsupported operator: {operator}")


def selected(item: SearchItem, op: SearchOp) -> bool:
    prefix = op.namespace_prefix
    return item.namespace[: len(prefix)] == prefix and all(
        matches(item.value.get(k), v) for k, v in (op.filter or {}).items()
    )


def namespace_matches(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    path = condition.path
    if len(namespace) < len(path):
        return False
    pairs = (
        zip(namespace, path, strict=False)
        if condition.match_type == "prefix"
        else zip(reversed(namespace), reversed(path), strict=False)
    )
    return all(p == "*" or n == p for n, p in pairs)


class LangGraphStore(BaseStore):
    """A LangGraph store kept in gql_memory (see the module's docstring for the mapping).

    ``index_fields``: the value's paths whose text is searchable when ``put`` gets no
    ``index`` (LangGraph's path syntax, ``$`` = the whole value as JSON). The synchronous
    methods need a ``MemoryStore``; the async ones take either class.
    """

    supports_ttl = False

    def __init__(self, store: Store, *, index_fields: Sequence[str] = (WHOLE_VALUE,)) -> None:
        self._bridge = StoreBridge(store)
        self.index_fields = list(index_fields)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        return self._bridge.run_blocking(lambda s: self._run(s, ops))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        return await self._bridge.run(lambda s: self._run(s, ops))

    async def _run(self, store: AsyncMemoryStore, ops: list[Op]) -> list[Result]:
        """The operations in order, each seeing the ones before it."""
        for op in ops:
            validate_op_namespace(op)
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                found = await self._get(store, op.namespace, op.key)
                results.append(None if found is None else plain(item_of(found)))
            elif isinstance(op, PutOp):
                await self._put(store, op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(await self._search(store, op))
            elif isinstance(op, ListNamespacesOp):
                results.append(await self._list_namespaces(store, op))
            else:
                raise ValueError(f"Unknown operation type: {type(op)}")
        return results

    async def _get(
        self, store: AsyncMemoryStore, namespace: tuple[str, ...], key: str
    ) -> Node | None:
        node = await store.graph.node_by_name(label_of(namespace), key)
        return node if node is not None and is_item(node) else None

    async def _put(self, store: AsyncMemoryStore, op: PutOp) -> None:
        old = await self._get(store, op.namespace, op.key)
        current = await store.insights.get(old.insight_id) if old and old.insight_id else None
        previous = [current.id] if current and current.is_valid else []
        if op.value is None:
            if old is not None:
                await store.graph.delete_node(old.id)
            if previous:
                await store.insights.invalidate(previous[0])
            return
        value = dict(op.value)
        now = datetime.now(UTC).isoformat()
        created = (old.properties or {}).get("created_at", now) if old else now
        fields = self.index_fields if op.index is None else op.index or []
        text = text_of(value, fields)
        insight_id = None
        if text:
            reference = {METADATA_KEY: {"namespace": list(op.namespace), "key": op.key}}
            try:
                insight = await store.insights.add(text, metadata=reference, supersedes=previous)
            except ValidationError:
                if not previous:
                    raise
                # a concurrent put superseded it first: the last node written wins
                insight = await store.insights.add(text, metadata=reference)
            insight_id = insight.id
        elif previous:
            await store.insights.invalidate(previous[0])
        properties = {"value": value, "created_at": created, "updated_at": now}
        if old is not None and insight_id is None and old.insight_id is not None:
            # an upsert keeps a link it is not given: drop the node to unlink the old text
            await store.graph.delete_node(old.id)
        await store.graph.add_node(
            label_of(op.namespace), op.key, properties, insight_id=insight_id
        )

    async def _items(self, store: AsyncMemoryStore) -> list[SearchItem]:
        """Every item of this namespace, most recently updated first."""
        items: list[SearchItem] = []
        after = None
        while True:
            page = await store.graph.list_nodes(first=PAGE, after=after)
            items.extend(item_of(n) for n in page.items if is_item(n))
            if not page.has_next_page:
                break
            after = page.end_cursor
        return sorted(items, key=lambda i: i.updated_at, reverse=True)

    async def _search(self, store: AsyncMemoryStore, op: SearchOp) -> list[SearchItem]:
        if op.query is None or not op.query.strip():
            found = [i for i in await self._items(store) if selected(i, op)]
            return found[op.offset : op.offset + op.limit]
        hits = await store.search(  # a store ranks its items: no relevance floor
            op.query,
            top_k=MAX_CANDIDATES,
            session_id=None,
            layers=[MemoryLayer.INSIGHT],
            min_relevance=0.0,
        )
        insights = await store.insights.get_many([h.id for h in hits])
        ranked: list[SearchItem] = []
        for hit in hits:
            insight = insights.get(hit.id)
            reference = reference_of(insight.metadata) if insight else None
            if reference is None:
                continue  # an insight that is not an item's
            node = await self._get(store, *reference)
            if node is None or node.insight_id != hit.id:
                continue
            item = item_of(node, score=hit.final_score)
            if selected(item, op):
                ranked.append(item)
        return ranked[op.offset : op.offset + op.limit]

    async def _list_namespaces(
        self, store: AsyncMemoryStore, op: ListNamespacesOp
    ) -> list[tuple[str, ...]]:
        namespaces = {i.namespace for i in await self._items(store)}
        kept = [
            n for n in namespaces if all(namespace_matches(n, c) for c in op.match_conditions or ())
        ]
        if op.max_depth is not None:
            kept = list({n[: op.max_depth] for n in kept})
        return sorted(kept)[op.offset : op.offset + op.limit]
