"""mem0's memories (mem0 OSS ``Memory.get_all``, run with ``infer=False`` or not) as insights.

The file is what ``get_all`` returns, as JSON: ``{"results": [item, ...]}`` (mem0 >= 1.1), a
bare list of items (mem0 1.0 and the platform's listing), or JSONL with one item a line. An
item is ``{"id", "memory", "hash", "metadata", "created_at", "updated_at", "user_id",
"agent_id", "run_id", "actor_id", "role", ...}`` (mem0/memory/main.py,
``_get_all_from_vector_store``).

Each memory becomes one insight: its text the content, embedded anew; mem0's updated_at
(else created_at) its validFrom; everything else mem0 said about it (ids, hash, dates, role,
its metadata, and any field this module does not know) under ``metadata.mem0``. Its key is
mem0's id with the memory's hash, so re-importing the same file adds nothing, and a memory
mem0 has changed since the last import is added again and supersedes the version imported
before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select

from gql_memory.db.clauses import any_of
from gql_memory.db.tables import insights
from gql_memory.errors import ValidationError
from gql_memory.memory.importer import IMPORT_KEY
from gql_memory.memory.insights import InsightInput, Insights
from gql_memory.memory.interchange.keyed_insights import KeyedInsight, add_insights_once
from gql_memory.memory.interchange.located_json import (
    invalid,
    item_lines,
    parse_json,
    read_text,
)
from gql_memory.memory.validation import require_json_object, require_text

SOURCE = "mem0"
IDS = ("user_id", "agent_id", "run_id", "actor_id")
NOT_KEPT = ("memory", "score")  # the content itself; a search's score is no property


@dataclass(frozen=True)
class Mem0Memory:
    mem0_id: str
    insight: KeyedInsight


def read_mem0(path: Path) -> list[Mem0Memory]:
    """Parse and validate a whole get_all file."""
    text = read_text(path)
    stripped = text.lstrip()
    if path.suffix.lower() in (".jsonl", ".ndjson") or not stripped.startswith(("{", "[")):
        records = [
            (f"line {n}", parse_json(line, f"line {n}"))
            for n, line in enumerate(text.splitlines(), 1)
            if line.strip()
        ]
    else:
        document = parse_json(text)
        if isinstance(document, dict) and isinstance(document.get("results"), list):
            items, lines = document["results"], item_lines(text, ("results", "*"))
        elif isinstance(document, list):
            items, lines = document, item_lines(text, ("*",))
        else:
            raise invalid("line 1", 'a mem0 file is {"results": [...]}, a list, or JSONL')
        records = [(f"line {line}", item) for line, item in zip(lines, items, strict=True)]
    memories: list[Mem0Memory] = []
    seen: dict[str, str] = {}
    for where, item in records:
        memory = _memory(item, where)
        first = seen.setdefault(memory.mem0_id, where)
        if first != where:
            raise invalid(where, f"mem0 id {memory.mem0_id!r} repeats {first}")
        memories.append(memory)
    return memories


def _memory(item: Any, where: str) -> Mem0Memory:
    if not isinstance(item, dict):
        raise invalid(where, "a mem0 memory must be a JSON object")
    try:
        content = require_text(item.get("memory"), "memory")
        mem0_id = require_text(item.get("id"), "id", max_length=255)
        for name in IDS:
            if item.get(name) is not None:
                require_text(item[name], name, max_length=255)
        kept = {k: v for k, v in item.items() if k not in NOT_KEPT and v is not None}
        metadata = {"source": SOURCE, SOURCE: kept}
        require_json_object(metadata, "metadata")
    except ValidationError as exc:
        raise invalid(where, str(exc)) from exc
    key = f"mem0:{mem0_id}:{item.get('hash') or ''}"
    metadata[IMPORT_KEY] = key
    return Mem0Memory(
        mem0_id,
        KeyedInsight(key, InsightInput(content, [], metadata, valid_from=_created(item, where))),
    )


def _created(item: dict[str, Any], where: str) -> datetime | None:
    """Since when the memory's text holds (mem0's updated_at, else created_at; ISO-8601), as
    the fact's validFrom; never later than now."""
    field = "updated_at" if item.get("updated_at") is not None else "created_at"
    value = item.get(field)
    if value is None:
        return None
    if not isinstance(value, str):
        raise invalid(where, f"{field} must be an ISO-8601 string")
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise invalid(where, f"{field} {value!r} is not ISO-8601") from exc
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return min(moment, datetime.now(UTC))


async def import_mem0(store: Insights, memories: Sequence[Mem0Memory]) -> int:
    """Store the memories not imported yet; how many were added. A memory whose mem0 id was
    imported before with another text supersedes that insight."""
    earlier = await _imported_versions(store, [m.mem0_id for m in memories])
    items = []
    for memory in memories:
        older = earlier.get(memory.mem0_id, {})
        replaced = [i for key, i in older.items() if key != memory.insight.key]
        if memory.insight.key in older:
            replaced = []  # this very version is stored: nothing to add
        insight = memory.insight.insight
        if replaced:
            insight = InsightInput(
                insight.content, [], insight.metadata, replaced, insight.valid_from
            )
        items.append(KeyedInsight(memory.insight.key, insight))
    return await add_insights_once(store, items)


async def _imported_versions(store: Insights, ids: list[str]) -> dict[str, dict[str, int]]:
    """mem0 id -> {import key: insight id} of the valid insights imported from it."""
    if not ids:
        return {}
    mem0_id = insights.c.metadata[SOURCE]["id"].astext
    key = insights.c.metadata[IMPORT_KEY].astext
    async with store.db.read() as conn:
        rows = await conn.execute(
            select(mem0_id, key, insights.c.id).where(
                insights.c.namespace == store.namespace,
                insights.c.valid_to.is_(None),
                insights.c.metadata["source"].astext == SOURCE,
                any_of(mem0_id, ids),
            )
        )
        found: dict[str, dict[str, int]] = {}
        for row in rows:
            found.setdefault(row[0], {})[row[1]] = row[2]
        return found
