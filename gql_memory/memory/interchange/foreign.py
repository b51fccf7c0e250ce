"""`gql-memory import --format mem0|mcp-memory|letta`: which foreign format a file is, its
parse (the whole file, before any database is started) and its import into a namespace."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gql_memory.errors import ValidationError
from gql_memory.memory import Memory
from gql_memory.memory.importer import ImportFormat, TranscriptImporter
from gql_memory.memory.interchange.keyed_insights import add_insights_once
from gql_memory.memory.interchange.letta import LettaFile, read_letta
from gql_memory.memory.interchange.located_json import parse_json, read_text
from gql_memory.memory.interchange.mcp_memory import (
    McpMemoryFile,
    import_mcp_memory,
    read_mcp_memory,
)
from gql_memory.memory.interchange.mem0 import Mem0Memory, import_mem0, read_mem0


class ForeignFormat(enum.Enum):
    MEM0 = "mem0"
    MCP_MEMORY = "mcp-memory"
    LETTA = "letta"


FOREIGN_FORMATS = tuple(f.value for f in ForeignFormat)


@dataclass(frozen=True)
class ForeignFile:
    """A parsed, validated file of another system, ready to import."""

    format: ForeignFormat
    content: list[Mem0Memory] | McpMemoryFile | LettaFile


def detect_foreign(path: Path) -> ForeignFormat | None:
    """The foreign format a file is, by content (``.af`` by its name), or None: a transcript
    or an unreadable file, for the transcript importer to judge."""
    if path.suffix.lower() == ".af":
        return ForeignFormat.LETTA
    try:
        text = read_text(path)
        head = text.lstrip()[:1]
        if head == "{" and text.count("\n") and path.suffix.lower() in (".jsonl", ".ndjson"):
            return _detect_line(text)
        document = parse_json(text) if head in ("{", "[") else None
    except (ValidationError, OSError):
        try:
            return _detect_line(read_text(path))
        except (ValidationError, OSError):
            return None
    if isinstance(document, dict):
        if isinstance(document.get("agents"), list) and "blocks" in document:
            return ForeignFormat.LETTA
        if isinstance(document.get("results"), list):  # get_all's answer: no transcript
            return ForeignFormat.MEM0
        return None
    return ForeignFormat.MEM0 if _mem0_items(document) else None


def _detect_line(text: str) -> ForeignFormat | None:
    """JSONL by its first record: an entity or relation of the MCP memory file, or a mem0
    memory."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    record = parse_json(first)
    if not isinstance(record, dict) or "speaker" in record or "content" in record:
        return None
    if record.get("type") in ("entity", "relation") and ("name" in record or "from" in record):
        return ForeignFormat.MCP_MEMORY
    return ForeignFormat.MEM0 if _mem0_items([record]) else None


def _mem0_items(items: Any) -> bool:
    return (
        isinstance(items, list)
        and bool(items)
        and all(isinstance(i, dict) and "memory" in i and "id" in i for i in items[:10])
        and not any("speaker" in i or "content" in i for i in items[:10])
    )


def read_foreign(
    path: Path, fmt: ForeignFormat | str, namespace: str, session_prefix: str = ""
) -> ForeignFile:
    """Parse and validate the whole file: a malformed record is one ValidationError naming
    its line, and nothing has been written."""
    fmt = ForeignFormat(fmt)
    if fmt is ForeignFormat.MEM0:
        return ForeignFile(fmt, read_mem0(path))
    if fmt is ForeignFormat.MCP_MEMORY:
        return ForeignFile(fmt, read_mcp_memory(path, namespace))
    return ForeignFile(fmt, read_letta(path, session_prefix))


PLURALS = {"memory": "memories", "entity": "entities"}


@dataclass(frozen=True)
class ForeignSummary:
    format: ForeignFormat
    parts: list[tuple[str, int, int]]  # (what, in the file, added)
    seconds: float

    def describe(self, namespace: str) -> str:
        counts = ", ".join(
            f"{added} of {total} {what if total == 1 else PLURALS.get(what, what + 's')}"
            for what, total, added in self.parts
        )
        return (
            f"imported {counts} into namespace '{namespace}' from {self.format.value} "
            f"(what was already there is skipped), {self.seconds:.1f} s"
        )


async def import_foreign(memory: Memory, file: ForeignFile) -> ForeignSummary:
    """Write a parsed file into ``memory``'s namespace, adding only what it lacks."""
    started = time.perf_counter()
    content = file.content
    parts: list[tuple[str, int, int]]
    if isinstance(content, McpMemoryFile):
        done = await import_mcp_memory(memory.knowledge_graph, content)
        parts = [
            ("entity", len(content.entities), done.entities),
            ("observation", content.observations, done.observations),
            ("relation", len(content.relations), done.relations),
        ]
    elif isinstance(content, LettaFile):
        # the transcript importer's batches and keys: re-runs skip the stored turns
        stored = (
            await TranscriptImporter(memory.raw).run(ImportFormat.JSONL, content.turns)
        ).stored
        blocks = await add_insights_once(memory.insights, content.blocks)
        parts = [
            ("message", len(content.turns), stored),
            ("memory block", len(content.blocks), blocks),
        ]
    else:
        parts = [("memory", len(content), await import_mem0(memory.insights, content))]
    return ForeignSummary(file.format, parts, time.perf_counter() - started)


def read_if_foreign(
    path: Path, fmt: str, namespace: str, session_prefix: str = ""
) -> ForeignFile | None:
    """The parsed file when ``fmt`` names a foreign format, or is ``auto`` and the content is
    one; None for a transcript."""
    if fmt == "auto":
        detected = detect_foreign(path)
        return None if detected is None else read_foreign(path, detected, namespace, session_prefix)
    if fmt in FOREIGN_FORMATS:
        return read_foreign(path, fmt, namespace, session_prefix)
    return None
