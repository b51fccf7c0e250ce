"""The nine tools of the reference MCP memory server (@modelcontextprotocol/server-memory),
served beside ours with the same names, input and output schemas, annotations and result
shapes, over our graph (gql_memory.memory.knowledge_graph), so a client configured for the
reference server works unchanged.

The schemas are written out here as the reference lists them (tools/list of version
2026.8.31); tests/mcp_server/test_reference_tools.py compares them, and every result, with the
real package.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.mcpserver.exceptions import UnexpectedToolError
from mcp_types import CallToolResult, TextContent, Tool, ToolAnnotations, ToolExecution
from pydantic import TypeAdapter
from typing_extensions import TypedDict

from gql_memory.mcp_server.errors import tool_error
from gql_memory.memory.knowledge_graph import Entity, KnowledgeGraphView, Relation
from gql_memory.store import AsyncMemoryStore

DRAFT_07 = "http://json-schema.org/draft-07/schema#"


def string(description: str | None = None) -> dict[str, Any]:
    return {"type": "string", **({"description": description} if description else {})}


def array(items: dict[str, Any], description: str | None = None) -> dict[str, Any]:
    return {
        "type": "array",
        "items": items,
        **({"description": description} if description else {}),
    }


def obj(properties: dict[str, Any], *, closed: bool, top: bool = False) -> dict[str, Any]:
    """An object schema as zod writes it: every property required; output objects closed."""
    schema: dict[str, Any] = {"$schema": DRAFT_07} if top else {}
    schema |= {"type": "object", "properties": properties}
    if properties:
        schema["required"] = list(properties)
    if closed:
        schema["additionalProperties"] = False
    return schema


def entity(closed: bool) -> dict[str, Any]:
    return obj(
        {
            "name": string("The name of the entity"),
            "entityType": string("The type of the entity"),
            "observations": array(
                string(), "An array of observation contents associated with the entity"
            ),
        },
        closed=closed,
    )


def relation(closed: bool) -> dict[str, Any]:
    return obj(
        {
            "from": string("The name of the entity where the relation starts"),
            "to": string("The name of the entity where the relation ends"),
            "relationType": string("The type of the relation"),
        },
        closed=closed,
    )


GRAPH_OUTPUT = obj(
    {"entities": array(entity(True)), "relations": array(relation(True))}, closed=True, top=True
)
DONE_OUTPUT = obj({"success": {"type": "boolean"}, "message": string()}, closed=True, top=True)


def hints_of(read_only: bool, destructive: bool, idempotent: bool) -> ToolAnnotations:
    return ToolAnnotations(
        read_only_hint=read_only,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=False,
    )


WRITE = hints_of(read_only=False, destructive=False, idempotent=False)
DELETE = hints_of(read_only=False, destructive=True, idempotent=True)
READ = hints_of(read_only=True, destructive=False, idempotent=True)


def tool(
    name: str,
    title: str,
    description: str,
    inputs: dict[str, Any],
    output: dict[str, Any],
    hints: ToolAnnotations,
) -> Tool:
    return Tool(
        name=name,
        title=title,
        description=description,
        input_schema=obj(inputs, closed=False, top=True),
        execution=ToolExecution(task_support="forbidden"),
        output_schema=output,
        annotations=hints,
    )


REFERENCE_TOOLS = [
    tool(
        "create_entities",
        "Create Entities",
        "Create multiple new entities in the knowledge graph",
        {"entities": array(entity(False))},
        obj({"entities": array(entity(True))}, closed=True, top=True),
        WRITE,
    ),
    tool(
        "create_relations",
        "Create Relations",
        "Create multiple new relations between entities in the knowledge graph. Relations "
        "should be in active voice",
        {"relations": array(relation(False))},
        obj({"relations": array(relation(True))}, closed=True, top=True),
        WRITE,
    ),
    tool(
        "add_observations",
        "Add Observations",
        "Add new observations to existing entities in the knowledge graph",
        {
            "observations": array(
                obj(
                    {
                        "entityName": string("The name of the entity to add the observations to"),
                        "contents": array(string(), "An array of observation contents to add"),
                    },
                    closed=False,
                )
            )
        },
        obj(
            {
                "results": array(
                    obj(
                        {"entityName": string(), "addedObservations": array(string())},
                        closed=True,
                    )
                )
            },
            closed=True,
            top=True,
        ),
        WRITE,
    ),
    tool(
        "delete_entities",
        "Delete Entities",
        "Delete multiple entities and their associated relations from the knowledge graph",
        {"entityNames": array(string(), "An array of entity names to delete")},
        DONE_OUTPUT,
        DELETE,
    ),
    tool(
        "delete_observations",
        "Delete Observations",
        "Delete specific observations from entities in the knowledge graph",
        {
            "deletions": array(
                obj(
                    {
                        "entityName": string("The name of the entity containing the observations"),
                        "observations": array(string(), "An array of observations to delete"),
                    },
                    closed=False,
                )
            )
        },
        DONE_OUTPUT,
        DELETE,
    ),
    tool(
        "delete_relations",
        "Delete Relations",
        "Delete multiple relations from the knowledge graph",
        {"relations": array(relation(False), "An array of relations to delete")},
        DONE_OUTPUT,
        DELETE,
    ),
    tool("read_graph", "Read Graph", "Read the entire knowledge graph", {}, GRAPH_OUTPUT, READ),
    tool(
        "search_nodes",
        "Search Nodes",
        "Search for nodes in the knowledge graph based on a query",
        {
            "query": string(
                "The search query to match against entity names, types, and observation content"
            )
        },
        GRAPH_OUTPUT,
        READ,
    ),
    tool(
        "open_nodes",
        "Open Nodes",
        "Open specific nodes in the knowledge graph by their names",
        {"names": array(string(), "An array of entity names to retrieve")},
        GRAPH_OUTPUT,
        READ,
    ),
]
REFERENCE_TOOL_NAMES = frozenset(t.name for t in REFERENCE_TOOLS)


# The inputs, checked as the reference's zod schemas check them (extra keys are ignored).
class EntityInput(TypedDict):
    name: str
    entityType: str
    observations: list[str]


# "from" is a keyword: the functional form
RelationInput = TypedDict("RelationInput", {"from": str, "to": str, "relationType": str})


class ObservationInput(TypedDict):
    entityName: str
    contents: list[str]


class DeletionInput(TypedDict):
    entityName: str
    observations: list[str]


class CreateEntities(TypedDict):
    entities: list[EntityInput]


class Relations(TypedDict):
    relations: list[RelationInput]


class AddObservations(TypedDict):
    observations: list[ObservationInput]


class DeleteEntities(TypedDict):
    entityNames: list[str]


class DeleteObservations(TypedDict):
    deletions: list[DeletionInput]


class NoInput(TypedDict):
    pass


class SearchNodes(TypedDict):
    query: str


class OpenNodes(TypedDict):
    names: list[str]


INPUTS: dict[str, TypeAdapter[Any]] = {
    "create_entities": TypeAdapter(CreateEntities),
    "create_relations": TypeAdapter(Relations),
    "add_observations": TypeAdapter(AddObservations),
    "delete_entities": TypeAdapter(DeleteEntities),
    "delete_observations": TypeAdapter(DeleteObservations),
    "delete_relations": TypeAdapter(Relations),
    "read_graph": TypeAdapter(NoInput),
    "search_nodes": TypeAdapter(SearchNodes),
    "open_nodes": TypeAdapter(OpenNodes),
}


def entity_json(e: Entity) -> dict[str, Any]:
    return {"name": e.name, "entityType": e.entity_type, "observations": list(e.observations)}


def relation_json(r: Relation) -> dict[str, Any]:
    return {"from": r.source, "to": r.target, "relationType": r.relation_type}


def relations_of(items: list[RelationInput]) -> list[Relation]:
    return [Relation(r["from"], r["to"], r["relationType"]) for r in items]


def graph_json(view: KnowledgeGraphView) -> dict[str, Any]:
    return {
        "entities": [entity_json(e) for e in view.entities],
        "relations": [relation_json(r) for r in view.relations],
    }


def result(shown: Any, structured: dict[str, Any]) -> CallToolResult:
    """The reference's result: ``shown`` as JSON.stringify(shown, null, 2) (or as it is, for
    a message), and the structured content."""
    body = shown if isinstance(shown, str) else json.dumps(shown, indent=2, ensure_ascii=False)
    return CallToolResult(
        content=[TextContent(type="text", text=body)], structured_content=structured
    )


def done(message: str) -> CallToolResult:
    return result(message, {"success": True, "message": message})


Handler = Callable[[dict[str, Any]], Awaitable[CallToolResult]]


def reference_handlers(store: AsyncMemoryStore) -> dict[str, Handler]:
    """The tools' implementations over ``store``'s knowledge graph, by name."""

    async def create_entities(args: dict[str, Any]) -> CallToolResult:
        given = [Entity(e["name"], e["entityType"], e["observations"]) for e in args["entities"]]
        created = [
            entity_json(e) for e in await store.memory.knowledge_graph.create_entities(given)
        ]
        return result(created, {"entities": created})

    async def create_relations(args: dict[str, Any]) -> CallToolResult:
        graph = store.memory.knowledge_graph
        created = await graph.create_relations(relations_of(args["relations"]))
        shown = [relation_json(r) for r in created]
        return result(shown, {"relations": shown})

    async def add_observations(args: dict[str, Any]) -> CallToolResult:
        additions = [(o["entityName"], o["contents"]) for o in args["observations"]]
        added = await store.memory.knowledge_graph.add_observations(additions)
        shown = [{"entityName": a.entity_name, "addedObservations": a.added} for a in added]
        return result(shown, {"results": shown})

    async def delete_entities(args: dict[str, Any]) -> CallToolResult:
        await store.memory.knowledge_graph.delete_entities(args["entityNames"])
        return done("Entities deleted successfully")

    async def delete_observations(args: dict[str, Any]) -> CallToolResult:
        deletions = [(d["entityName"], d["observations"]) for d in args["deletions"]]
        await store.memory.knowledge_graph.delete_observations(deletions)
        return done("Observations deleted successfully")

    async def delete_relations(args: dict[str, Any]) -> CallToolResult:
        await store.memory.knowledge_graph.delete_relations(relations_of(args["relations"]))
        return done("Relations deleted successfully")

    async def read_graph(args: dict[str, Any]) -> CallToolResult:
        shown = graph_json(await store.memory.knowledge_graph.read_graph())
        return result(shown, shown)

    async def search_nodes(args: dict[str, Any]) -> CallToolResult:
        shown = graph_json(await store.memory.knowledge_graph.search_nodes(args["query"]))
        return result(shown, shown)

    async def open_nodes(args: dict[str, Any]) -> CallToolResult:
        shown = graph_json(await store.memory.knowledge_graph.open_nodes(args["names"]))
        return result(shown, shown)

    handlers: dict[str, Handler] = {
        "create_entities": create_entities,
        "create_relations": create_relations,
        "add_observations": add_observations,
        "delete_entities": delete_entities,
        "delete_observations": delete_observations,
        "delete_relations": delete_relations,
        "read_graph": read_graph,
        "search_nodes": search_nodes,
        "open_nodes": open_nodes,
    }
    return handlers


async def call_reference_tool(
    handlers: dict[str, Handler], name: str, arguments: dict[str, Any]
) -> CallToolResult:
    """Run one of the reference tools; a failure is a tool error in the seeds' shape."""
    try:
        return await handlers[name](INPUTS[name].validate_python(arguments))
    except Exception as exc:
        wrapped = UnexpectedToolError(f"Error executing tool {name}")
        wrapped.__cause__ = exc
        return tool_error(name, wrapped)
