"""The knowledge graph of the reference MCP memory server (@modelcontextprotocol/server-memory)
over our memory graph: entities, relations and observations.

- An entity is a node: ``entityType`` is its label, ``name`` its name.
- A relation is an edge valid now between two entities (``relationType`` is its relation).
- An observation is an insight, embedded and searchable like any other, whose metadata says
  whose it is: ``{"observation_of": {"name": ..., "entityType": ...}}``.

The reference names an entity by its name alone; a name that several labels share (made by
``graph_add_node``) stands for the oldest of them. Automatic nodes and edges (autograph.py,
``{"auto": true}``) are memory structure, not entities: they are never shown. Deleting a
relation or an observation closes the fact (``valid_to``: it leaves reads and searches of now
and stays in the history); deleting an entity erases the node, its edges and its observations.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete, text
from sqlalchemy.ext.asyncio import AsyncConnection

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.clauses import any_of
from gql_memory.db.tables import insights, nodes
from gql_memory.errors import ValidationError
from gql_memory.memory.erasure import detach
from gql_memory.memory.events import EventKind, MemoryEvent, publish
from gql_memory.memory.graph.autograph import forget_auto_nodes
from gql_memory.memory.graph.nodes import MAX_NODE_KEY_BYTES
from gql_memory.memory.insights import InsightInput, Insights
from gql_memory.memory.knowledge_graph_sql import (
    CREATE_ENTITIES_SQL,
    CREATE_RELATIONS_SQL,
    ENTITIES_SQL,
    NAMED_SQL,
    OBSERVATION_OF,
    OBSERVATIONS_SQL,
    RELATIONS_SQL,
    SUBSTRING_SQL,
)
from gql_memory.memory.search.pipeline import HybridSearch
from gql_memory.memory.search.types import MemoryLayer
from gql_memory.memory.validation import check_storable, require_text
from gql_memory.memory.validity import close_facts

# How many hybrid-search hits search_nodes looks through for observations beyond substrings.
SEARCH_HITS = 20


@dataclass(frozen=True)
class Entity:
    name: str
    entity_type: str
    observations: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Relation:
    source: str
    target: str
    relation_type: str


@dataclass(frozen=True)
class KnowledgeGraphView:
    entities: list[Entity]
    relations: list[Relation]


@dataclass(frozen=True)
class AddedObservations:
    entity_name: str
    added: list[str]


def not_found(name: str) -> ValidationError:
    return ValidationError(f"Entity with name {name} not found")  # the reference's words


def check_all_storable(values: Iterable[str], field: str) -> None:
    """Every string PostgreSQL can bind (no NUL): names looked up, contents compared."""
    for value in values:
        check_storable(value, field)


def check_relations(relations: Sequence[Relation]) -> None:
    check_all_storable((r.source for r in relations), "from")
    check_all_storable((r.target for r in relations), "to")


class KnowledgeGraph:
    """The reference server's nine operations over one namespace's graph and insights."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        namespace: str,
        insights: Insights,
        search: HybridSearch,
    ) -> None:
        self.db = db
        self.settings = settings
        self.namespace = namespace
        self.insights = insights
        self.hybrid = search

    async def create_entities(self, entities: Sequence[Entity]) -> list[Entity]:
        """The entities whose name is new (any other is left as it is), with their
        observations."""
        for entity in entities:
            label = require_text(entity.entity_type, "entityType", max_length=255)
            name = require_text(entity.name, "name", max_length=MAX_NODE_KEY_BYTES)
            for observation in entity.observations:
                require_text(observation, "observations")
            if len(f"{self.namespace}{label}{name}".encode()) > MAX_NODE_KEY_BYTES:
                raise ValidationError(
                    f"name and entityType together must be at most {MAX_NODE_KEY_BYTES} bytes"
                )
        async with self.db.write() as conn:
            existing = {row.name for row in await self._named(conn, [e.name for e in entities])}
            new: dict[str, Entity] = {}
            for entity in entities:
                if entity.name not in existing:
                    new.setdefault(entity.name, entity)
            created = list(new.values())
            if created:
                ids = (
                    await conn.execute(
                        text(CREATE_ENTITIES_SQL),
                        {
                            "ns": self.namespace,
                            "labels": [e.entity_type for e in created],
                            "names": [e.name for e in created],
                        },
                    )
                ).scalars()
                event = MemoryEvent(EventKind.NODE_ADDED, self.namespace, ids=tuple(ids))
                await publish(conn, event)
        await self._observe([(e, e.observations) for e in created])
        return created

    async def create_relations(self, relations: Sequence[Relation]) -> list[Relation]:
        """The relations that did not hold yet. Both ends must be entities."""
        check_relations(relations)
        for relation in relations:
            require_text(relation.relation_type, "relationType", max_length=255)
        async with self.db.write() as conn:
            ids = await self._ids_by_name(
                conn, [name for r in relations for name in (r.source, r.target)]
            )
            for relation in relations:
                for name in (relation.source, relation.target):
                    if name not in ids:
                        raise not_found(name)
                if ids[relation.source] == ids[relation.target]:
                    raise ValidationError(
                        f"A relation cannot connect {relation.source} to itself (self-loop)"
                    )
            rows = (
                await conn.execute(
                    text(CREATE_RELATIONS_SQL),
                    {
                        "ns": self.namespace,
                        "sources": [ids[r.source] for r in relations],
                        "targets": [ids[r.target] for r in relations],
                        "relations": [r.relation_type for r in relations],
                    },
                )
            ).all()
            for row in rows:
                event = (row.id, row.source_id, row.target_id)
                await publish(conn, MemoryEvent(EventKind.EDGE_ADDED, self.namespace, ids=event))
        created = {(r.source_id, r.target_id, r.relation) for r in rows}
        result: list[Relation] = []
        for relation in relations:
            key = (ids[relation.source], ids[relation.target], relation.relation_type)
            if key in created:
                created.discard(key)
                result.append(relation)
        return result

    async def add_observations(
        self, additions: Sequence[tuple[str, Sequence[str]]]
    ) -> list[AddedObservations]:
        """Per (entity name, contents): the contents the entity did not have yet, added."""
        names = [name for name, _ in additions]
        check_all_storable(names, "entityName")
        for _, contents in additions:
            for content in contents:
                require_text(content, "contents")
        async with self.db.read() as conn:
            entities = await self._entities_by_name(conn, names)
        for name in names:
            if name not in entities:
                raise not_found(name)
        seen = {name: set(entity.observations) for name, entity in entities.items()}
        results: list[AddedObservations] = []
        for name, contents in additions:
            added = [c for c in contents if c not in seen[name]]
            seen[name].update(added)
            results.append(AddedObservations(name, added))
        await self._observe([(entities[r.entity_name], r.added) for r in results])
        return results

    async def delete_entities(self, names: Sequence[str]) -> None:
        """Erase the entities, their relations and their observations."""
        check_all_storable(names, "entityNames")
        async with self.db.write() as conn:
            found = await self._named(conn, list(names))
            if not found:
                return
            observations = (
                await conn.execute(
                    text(OBSERVATIONS_SQL),
                    {"ns": self.namespace, "names": sorted({row.name for row in found})},
                )
            ).all()
            labels = {(row.name, row.label) for row in found}
            erased = [o.id for o in observations if (o.name, o.entity_type) in labels]
            if erased:
                await forget_auto_nodes(conn, self.namespace, insight_ids=erased)
                await detach(conn, "insights", self.namespace, erased)
                await conn.execute(
                    delete(insights).where(
                        insights.c.namespace == self.namespace, any_of(insights.c.id, erased)
                    )
                )
                event = MemoryEvent(EventKind.INSIGHT_DELETED, self.namespace, ids=tuple(erased))
                await publish(conn, event)
            node_ids = [row.id for row in found]
            await detach(conn, "nodes", self.namespace, node_ids)
            await conn.execute(
                delete(nodes).where(
                    nodes.c.namespace == self.namespace, any_of(nodes.c.id, node_ids)
                )
            )
            event = MemoryEvent(EventKind.NODE_DELETED, self.namespace, ids=tuple(node_ids))
            await publish(conn, event)

    async def delete_observations(self, deletions: Sequence[tuple[str, Sequence[str]]]) -> None:
        """Close the named observations of the named entities (unknown ones are ignored)."""
        for name, contents in deletions:
            check_storable(name, "entityName")
            check_all_storable(contents, "observations")
        async with self.db.write() as conn:
            entities = await self._entities_by_name(conn, [name for name, _ in deletions])
            observations = (
                await conn.execute(
                    text(OBSERVATIONS_SQL),
                    {"ns": self.namespace, "names": sorted(entities)},
                )
            ).all()
            doomed = {
                (name, entities[name].entity_type, content)
                for name, contents in deletions
                if name in entities
                for content in contents
            }
            closed = [o.id for o in observations if (o.name, o.entity_type, o.content) in doomed]
            if closed:
                await close_facts(conn, "insights", self.namespace, closed, None)
                event = MemoryEvent(
                    EventKind.INSIGHT_INVALIDATED, self.namespace, ids=tuple(closed)
                )
                await publish(conn, event)

    async def delete_relations(self, relations: Sequence[Relation]) -> None:
        """Close the named relations (unknown ones are ignored)."""
        check_relations(relations)
        check_all_storable((r.relation_type for r in relations), "relationType")
        doomed = {(r.source, r.target, r.relation_type) for r in relations}
        async with self.db.write() as conn:
            ids = await self._ids_by_name(
                conn, [n for r in relations for n in (r.source, r.target)]
            )
            if not ids:
                return
            rows = (
                await conn.execute(
                    text(RELATIONS_SQL), {"ns": self.namespace, "ids": sorted(set(ids.values()))}
                )
            ).all()
            closed = [
                row
                for row in rows
                if (row.source, row.target, row.relation) in doomed
                and ids.get(row.source) == row.source_id
                and ids.get(row.target) == row.target_id
            ]
            if closed:
                await close_facts(conn, "edges", self.namespace, [r.id for r in closed], None)
                for row in closed:
                    event = MemoryEvent(
                        EventKind.EDGE_INVALIDATED,
                        self.namespace,
                        ids=(row.id, row.source_id, row.target_id),
                    )
                    await publish(conn, event)

    async def read_graph(self) -> KnowledgeGraphView:
        async with self.db.read() as conn:
            return await self._view(conn, None)

    async def open_nodes(self, names: Sequence[str]) -> KnowledgeGraphView:
        """The named entities and every relation touching one of them."""
        check_all_storable(names, "names")
        async with self.db.read() as conn:
            found = await self._named(conn, list(names))
            return await self._view(conn, [row.id for row in found])

    async def search_nodes(self, query: str) -> KnowledgeGraphView:
        """The entities whose name, type or an observation contains ``query`` (the reference's
        case-insensitive substring), then those with an observation among the hits of hybrid
        search that the full-text leg matched or the vector leg found at least
        GQL_MEMORY_MCP_SEARCH_NODES_MIN_SIMILARITY similar; and every relation touching one."""
        if not isinstance(query, str):
            raise ValidationError("query must be a string")
        check_storable(query, "query")
        async with self.db.read() as conn:
            matched = list(
                (await conn.execute(text(SUBSTRING_SQL), {"ns": self.namespace, "q": query}))
                .scalars()
                .all()
            )
        try:
            searched = await self._searched(query) if query.strip() else []
        except ValidationError:  # too long a query for hybrid search: the substrings alone
            searched = []
        matched += [i for i in searched if i not in matched]
        async with self.db.read() as conn:
            view = await self._view(conn, matched)
        return view

    async def _searched(self, query: str) -> list[int]:
        """Entity ids of the observations hybrid search finds for ``query``, best first."""
        floor = self.settings.mcp_search_nodes_min_similarity
        # a name or a phrase to match, never a question about a period (whatever the setting)
        hits = await self.hybrid.search(
            query,
            SEARCH_HITS,
            None,
            [MemoryLayer.INSIGHT],
            interpret_time=False,
            min_relevance=0.0,  # the similarity floor below is this tool's own
        )
        kept = [
            h.id
            for h in hits
            if h.text_rank is not None or (h.vector_score is not None and h.vector_score >= floor)
        ]
        found = await self.insights.get_many(kept)
        owners: list[tuple[str, str]] = []
        for insight_id in kept:
            insight = found.get(insight_id)
            owner = (insight.metadata or {}).get(OBSERVATION_OF) if insight else None
            if isinstance(owner, dict):
                key = (str(owner.get("name")), str(owner.get("entityType")))
                if key not in owners:
                    owners.append(key)
        if not owners:
            return []
        async with self.db.read() as conn:
            rows = await self._named(conn, [name for name, _ in owners])
        ids = {(row.name, row.label): row.id for row in rows}
        return [ids[o] for o in owners if o in ids]

    async def _observe(self, items: Sequence[tuple[Entity, Sequence[str]]]) -> None:
        """Store observations as insights of their entity."""
        inputs = [
            InsightInput(
                content,
                [],
                {OBSERVATION_OF: {"name": entity.name, "entityType": entity.entity_type}},
            )
            for entity, contents in items
            for content in contents
        ]
        await self.insights.add_many(inputs)

    async def _named(self, conn: AsyncConnection, names: list[str]) -> list[Any]:
        """Visible nodes named ``names``, oldest first."""
        if not names:
            return []
        return list(
            (await conn.execute(text(NAMED_SQL), {"ns": self.namespace, "names": names})).all()
        )

    async def _ids_by_name(self, conn: AsyncConnection, names: list[str]) -> dict[str, int]:
        """The node each name stands for: the oldest visible node of that name."""
        ids: dict[str, int] = {}
        for row in await self._named(conn, names):
            ids.setdefault(row.name, row.id)
        return ids

    async def _entities_by_name(self, conn: AsyncConnection, names: list[str]) -> dict[str, Entity]:
        ids = await self._ids_by_name(conn, names)
        view = await self._view(conn, list(ids.values()), with_relations=False)
        return {entity.name: entity for entity in view.entities}

    async def _view(
        self, conn: AsyncConnection, ids: list[int] | None, with_relations: bool = True
    ) -> KnowledgeGraphView:
        """Entities (all, or those of ``ids``, in that order) with their observations, and the
        relations touching them."""
        if ids is not None and not ids:
            return KnowledgeGraphView([], [])
        params = {"ns": self.namespace, "ids": ids}
        rows = list((await conn.execute(text(ENTITIES_SQL), params)).all())
        names = None if ids is None else sorted({row.name for row in rows})
        observed: dict[tuple[str, str], list[str]] = {}
        for o in await conn.execute(text(OBSERVATIONS_SQL), {"ns": self.namespace, "names": names}):
            observed.setdefault((o.name, o.entity_type), []).append(o.content)
        order = {node_id: i for i, node_id in enumerate(ids or [])}
        rows.sort(key=lambda row: order.get(row.id, row.id))
        entities = [
            Entity(row.name, row.label, observed.get((row.name, row.label), [])) for row in rows
        ]
        relations: list[Relation] = []
        if with_relations:
            relations = [
                Relation(r.source, r.target, r.relation)
                for r in await conn.execute(text(RELATIONS_SQL), params)
            ]
        return KnowledgeGraphView(entities, relations)
