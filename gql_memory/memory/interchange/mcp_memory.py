"""The memory file of the reference MCP memory server (@modelcontextprotocol/server-memory) as
the knowledge graph our reference tools serve (gql_memory/memory/knowledge_graph.py).

The file is JSONL, as the server's saveGraph writes it: ``{"type": "entity", "name",
"entityType", "observations": [...]}`` and ``{"type": "relation", "from", "to",
"relationType"}``. Entities become nodes (entityType their label), observations insights of
their entity, relations edges; the import goes through the same operations as the tools
(create_entities, add_observations, create_relations), so read_graph, open_nodes and
search_nodes then answer as the reference server does over the file, and re-running it adds
nothing: an entity whose name the namespace has keeps its type and gains the observations it
lacks, a relation that holds is left as it is.

What our graph cannot hold is refused before anything is written, naming the line: a relation
whose end is no entity of the file, a relation from an entity to itself, an entity name that
repeats, an empty name, type or observation.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gql_memory.errors import ValidationError
from gql_memory.memory.graph.nodes import MAX_NODE_KEY_BYTES
from gql_memory.memory.interchange.located_json import invalid, parse_json, read_text
from gql_memory.memory.knowledge_graph import Entity, KnowledgeGraph, Relation
from gql_memory.memory.validation import require_text


@dataclass(frozen=True)
class McpMemoryFile:
    entities: list[Entity]
    relations: list[Relation]

    @property
    def observations(self) -> int:
        return sum(len(e.observations) for e in self.entities)


@dataclass(frozen=True)
class McpMemoryImport:
    entities: int
    observations: int
    relations: int


def read_mcp_memory(path: Path, namespace: str) -> McpMemoryFile:
    """Parse and validate a whole memory file (see the module docstring for what is refused)."""
    entities: dict[str, tuple[str, Entity]] = {}
    relations: list[tuple[str, Relation]] = []
    for number, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        where = f"line {number}"
        record = parse_json(line, where)
        try:
            kind = record.get("type") if isinstance(record, dict) else None
            if kind == "entity":
                entity = _entity(record, namespace)
                if entity.name in entities:
                    first = entities[entity.name][0]
                    raise ValidationError(f"entity {entity.name!r} repeats {first}")
                entities[entity.name] = (where, entity)
            elif kind == "relation":
                relations.append((where, _relation(record)))
            else:
                raise ValidationError('each line must be {"type": "entity" or "relation", ...}')
        except ValidationError as exc:
            raise invalid(where, str(exc)) from exc
    unique: dict[tuple[str, str, str], Relation] = {}
    for where, relation in relations:
        for end in (relation.source, relation.target):
            if end not in entities:
                raise invalid(where, f"relation to {end!r}, which is no entity of the file")
        if relation.source == relation.target:
            raise invalid(where, f"a relation cannot connect {relation.source!r} to itself")
        unique.setdefault((relation.source, relation.target, relation.relation_type), relation)
    return McpMemoryFile([e for _, e in entities.values()], list(unique.values()))


def _entity(record: dict[str, Any], namespace: str) -> Entity:
    name = require_text(record.get("name"), "name", max_length=MAX_NODE_KEY_BYTES)
    label = require_text(record.get("entityType"), "entityType", max_length=255)
    if len(f"{namespace}{label}{name}".encode()) > MAX_NODE_KEY_BYTES:
        raise ValidationError(
            f"name and entityType together must be at most {MAX_NODE_KEY_BYTES} bytes"
        )
    observations = record.get("observations", [])
    if not isinstance(observations, list):
        raise ValidationError("observations must be a list of strings")
    return Entity(name, label, [require_text(o, "observations") for o in observations])


def _relation(record: dict[str, Any]) -> Relation:
    return Relation(
        require_text(record.get("from"), "from", max_length=MAX_NODE_KEY_BYTES),
        require_text(record.get("to"), "to", max_length=MAX_NODE_KEY_BYTES),
        require_text(record.get("relationType"), "relationType", max_length=255),
    )


async def import_mcp_memory(graph: KnowledgeGraph, memory: McpMemoryFile) -> McpMemoryImport:
    """Write the file's graph through the reference tools' operations: what the namespace
    holds already is left, what it lacks is added."""
    created = await graph.create_entities(memory.entities)
    new = {e.name for e in created}
    known = [(e.name, e.observations) for e in memory.entities if e.name not in new]
    added = await graph.add_observations(known) if known else []
    relations = await graph.create_relations(memory.relations) if memory.relations else []
    return McpMemoryImport(
        entities=len(created),
        observations=sum(len(e.observations) for e in created) + sum(len(a.added) for a in added),
        relations=len(relations),
    )
