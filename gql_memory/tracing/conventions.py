"""The names our spans use, from the OpenTelemetry semantic conventions.

The GenAI memory conventions are not in ``opentelemetry-semantic-conventions`` (0.66b2 has
``gen_ai.operation.name`` but no memory values or ``gen_ai.memory.*``: the GenAI conventions
moved to the open-telemetry/semantic-conventions-genai repository). The names below are the
ones that repository merged in "Add GenAI memory operation conventions" (#140, May 2026,
from semantic-conventions#3250): memory operations as ``gen_ai.operation.name`` values
(``search_memory``, ``create_memory``, ``update_memory``, ``delete_memory``, with
``create_memory_store`` / ``delete_memory_store`` for stores), the store and record ids as
``gen_ai.memory.store.id`` / ``gen_ai.memory.record.id``, and the content-bearing
``gen_ai.memory.query.text`` / ``gen_ai.memory.records`` as opt-in attributes (sensitive:
never recorded by default). docs/observability.md cites them.
"""

from __future__ import annotations

# gen_ai.* (GenAI conventions)
OPERATION_NAME = "gen_ai.operation.name"
MEMORY_STORE_ID = "gen_ai.memory.store.id"  # our namespace
MEMORY_RECORD_ID = "gen_ai.memory.record.id"  # the id of the memory a write made or touched
MEMORY_QUERY_TEXT = "gen_ai.memory.query.text"  # opt-in (GQL_MEMORY_TRACE_CONTENT)
MEMORY_RECORDS = "gen_ai.memory.records"  # opt-in (GQL_MEMORY_TRACE_CONTENT)
PROVIDER_NAME = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
TOOL_NAME = "gen_ai.tool.name"

SEARCH_MEMORY = "search_memory"
CREATE_MEMORY = "create_memory"
UPDATE_MEMORY = "update_memory"
DELETE_MEMORY = "delete_memory"
EMBEDDINGS = "embeddings"  # in the package: GenAiOperationNameValues.EMBEDDINGS

# general conventions (opentelemetry-semantic-conventions: error.type, db.*, graphql.*, mcp.*)
ERROR_TYPE = "error.type"
DB_SYSTEM_NAME = "db.system.name"
DB_OPERATION_NAME = "db.operation.name"
DB_QUERY_TEXT = "db.query.text"  # the parameterized statement: values are never in it
GRAPHQL_OPERATION_TYPE = "graphql.operation.type"
MCP_METHOD_NAME = "mcp.method.name"
