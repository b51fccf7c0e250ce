"""The export format (docs/interchange.md): versioned JSONL, a header line, then one record per
row, kind by kind. This module owns what a record holds and how each field is written and read
back, so that export and import can never disagree; it knows nothing about the database.

A field's ``decode`` is the validation of everything else that stores it (memory/validation.py):
an export is held to the same limits as the API.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Table

from gql_memory.config import MAX_QUERY_CHARS
from gql_memory.db.tables import (
    ARCHIVE_REASONS,
    CONSOLIDATION_KINDS,
    REF_KINDS,
    SUPERSESSION_REASONS,
    consolidation_actions,
    consolidation_cursors,
    edges,
    episodes,
    insights,
    nodes,
    raw_dialogue,
    session_state,
    stale_memory,
    working_memory,
)
from gql_memory.errors import ValidationError
from gql_memory.memory.episodes import require_reward
from gql_memory.memory.graph.nodes import MAX_NODE_KEY_BYTES
from gql_memory.memory.insights import MAX_SOURCE_IDS
from gql_memory.memory.validation import (
    require_id,
    require_importance,
    require_json_object,
    require_session_id,
    require_storable_moment,
    require_text,
)
from gql_memory.memory.validity import require_aware

FORMAT = "gql-memory-export"
VERSION = 1  # what this code writes, and the newest it reads

Decode = Callable[[Any, str], Any]
Encode = Callable[[Any], Any]


class LineError(ValidationError):
    """A record that cannot be read or stored; the message names its line."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


# --- field codecs: JSON value <-> column value ------------------------------------------------


def _as_is(value: Any) -> Any:
    return value


def _moment(value: Any, name: str) -> datetime:
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be an ISO-8601 date-time string")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise ValidationError(f"{name} {value[:40]!r} is not ISO-8601") from exc
    return require_storable_moment(require_aware(parsed, name), name)


def _optional(decode: Decode) -> Decode:
    return lambda value, name: None if value is None else decode(value, name)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _text(max_length: int | None = None) -> Decode:
    return lambda value, name: require_text(value, name, max_length=max_length)


def _finite(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValidationError(f"{name} must be a finite number")
    return float(value)


def _count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        raise ValidationError(f"{name} must be a non-negative integer")
    return value


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(f"{name} must be true or false")
    return value


def _choice(*allowed: str) -> Decode:
    def decode(value: Any, name: str) -> str:
        if value not in allowed:
            raise ValidationError(f"{name} must be one of {', '.join(allowed)}")
        return str(value)

    return decode


def _ids(value: Any, name: str) -> list[int]:
    if not isinstance(value, list) or len(value) > MAX_SOURCE_IDS:
        raise ValidationError(f"{name} must be a list of at most {MAX_SOURCE_IDS} ids")
    return [require_id(v, name) for v in value]


def _json_object(value: Any, name: str) -> dict[str, Any] | None:
    return require_json_object(value, name)


FLOAT4_MAX = 3.4028234663852886e38  # pgvector stores single precision


def _vector(value: Any, name: str) -> list[float]:
    if not isinstance(value, list) or not value:
        raise ValidationError(f"{name} must be a list of numbers")
    vector = [_finite(v, name) for v in value]
    if any(abs(v) > FLOAT4_MAX for v in vector):
        raise ValidationError(f"{name} must hold numbers of single precision (at most 3.4e38)")
    return vector


# --- record kinds ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    """One JSON field of a record and the column it holds. ``ref`` names the kind of record an
    id field refers to (remapped on import); ``deferred``: it may name a later record."""

    name: str
    column: str
    decode: Decode
    encode: Encode = _as_is
    ref: str | None = None
    deferred: bool = False
    # a reference without a foreign key (a memory that may since be gone): an id that names
    # no record of the file gets a fresh id that no row has (see interchange/ids.py)
    loose: bool = False


ID = Field("id", "id", require_id)


def _validity(kind: str) -> list[Field]:
    return [
        Field("validFrom", "valid_from", _moment, _iso),
        Field("validTo", "valid_to", _optional(_moment), _iso),
        Field("supersededBy", "superseded_by", _optional(require_id), ref=kind, deferred=True),
        Field(
            "supersessionReason", "supersession_reason", _optional(_choice(*SUPERSESSION_REASONS))
        ),
    ]


@dataclass(frozen=True)
class Kind:
    """A record kind: the rows of one table. ``embedded``: the table holds vectors."""

    name: str
    table: Table
    fields: list[Field]
    embedded: bool = False
    has_id: bool = True
    by_name: dict[str, Field] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_name", {f.name: f for f in self.fields})


# In file order: every reference that is not deferred names a kind listed before its own.
KINDS: list[Kind] = [
    Kind(
        "session",
        session_state,
        [
            Field("sessionId", "session_id", lambda v, n: require_session_id(v)),
            Field("eventCounter", "event_counter", _count),
        ],
        has_id=False,
    ),
    Kind(
        "raw",
        raw_dialogue,
        [
            ID,
            Field("sessionId", "session_id", lambda v, n: require_session_id(v)),
            Field("speaker", "speaker", _text(50)),
            Field("content", "content", _text()),
            Field("metadata", "metadata", _json_object),
            Field("timestamp", "timestamp", _moment, _iso),
            Field("importKey", "import_key", _optional(_text(1000))),
        ],
        embedded=True,
    ),
    Kind(
        "insight",
        insights,
        [
            ID,
            Field("content", "content", _text()),
            Field("sourceIds", "source_ids", _ids, list, ref="raw", loose=True),
            Field("metadata", "metadata", _json_object),
            Field("createdAt", "created_at", _moment, _iso),
            Field("digestOf", "digest_of", _optional(_text(255))),
            *_validity("insight"),
        ],
        embedded=True,
    ),
    Kind(
        "episode",
        episodes,
        [
            ID,
            Field("query", "query", _text(MAX_QUERY_CHARS)),
            Field("reward", "reward", lambda v, n: require_reward(v)),
            Field("reflection", "reflection", _text()),
            Field("createdAt", "created_at", _moment, _iso),
            *_validity("episode"),
        ],
        embedded=True,
    ),
    Kind(
        "node",
        nodes,
        [
            ID,
            Field("label", "label", _text(255)),
            Field("name", "name", _text(MAX_NODE_KEY_BYTES)),
            Field("properties", "properties", _json_object),
            Field("insightId", "insight_id", _optional(require_id), ref="insight"),
            Field("episodeId", "episode_id", _optional(require_id), ref="episode"),
            Field("rawId", "raw_id", _optional(require_id), ref="raw"),
            Field("createdAt", "created_at", _moment, _iso),
            Field("mergedInto", "merged_into", _optional(require_id), ref="node", deferred=True),
        ],
    ),
    Kind(
        "edge",
        edges,
        [
            ID,
            Field("sourceId", "source_id", require_id, ref="node"),
            Field("targetId", "target_id", require_id, ref="node"),
            Field("relation", "relation", _text(255)),
            Field("weight", "weight", _finite),
            Field("properties", "properties", _json_object),
            Field("createdAt", "created_at", _moment, _iso),
            *_validity("edge"),
        ],
    ),
    Kind(
        "working",
        working_memory,
        [
            ID,
            Field("sessionId", "session_id", lambda v, n: require_session_id(v)),
            Field("content", "content", _text()),
            Field("importance", "importance", lambda v, n: require_importance(v, n)),
            Field("lastAccessed", "last_accessed", _moment, _iso),
            Field("createdAt", "created_at", _moment, _iso),
            Field("attention", "attention", _optional(_finite)),
            Field("mentionCount", "mention_count", _count),
            Field("lastEvent", "last_event", _count),
            Field("refKind", "ref_kind", _optional(_choice(*REF_KINDS))),
            Field("refId", "ref_id", _optional(require_id), ref="refKind", loose=True),
            Field("provenance", "provenance", _json_object),
        ],
    ),
    Kind(
        "stale",
        stale_memory,
        [
            ID,
            Field("sessionId", "session_id", lambda v, n: require_session_id(v)),
            Field("originalId", "original_id", _optional(require_id), ref="working", loose=True),
            Field("originalContent", "original_content", _text()),
            Field("importance", "importance", lambda v, n: require_importance(v, n)),
            Field("reason", "reason", _choice(*ARCHIVE_REASONS)),
            Field("archivedAt", "archived_at", _moment, _iso),
            Field("refKind", "ref_kind", _optional(_choice(*REF_KINDS))),
            Field("refId", "ref_id", _optional(require_id), ref="refKind", loose=True),
            Field("provenance", "provenance", _json_object),
        ],
    ),
    # The consolidation journal, as history: what was merged, superseded, digested, made an
    # alias, and why. Its ids name rows of the exporting database (an import renumbers rows),
    # and what stood before each action is not exported: an imported action is not undone.
    Kind(
        "consolidation",
        consolidation_actions,
        [
            ID,
            Field("action", "kind", _choice(*CONSOLIDATION_KINDS)),
            Field("targetId", "target_id", _optional(require_id)),
            Field("ids", "ids", _ids, list),
            Field("reason", "reason", _text()),
            Field("evidence", "evidence", _json_object),
            Field("createdAt", "created_at", _moment, _iso),
            Field("undoneAt", "undone_at", _optional(_moment), _iso),
        ],
    ),
    Kind(
        "consolidationCursor",
        consolidation_cursors,
        [
            Field("insightId", "insight_id", _count, ref="insight", loose=True),
            Field("updatedAt", "updated_at", _moment, _iso),
        ],
        has_id=False,
    ),
]
BY_NAME = {kind.name: kind for kind in KINDS}
ORDER = {kind.name: position for position, kind in enumerate(KINDS)}
# refKind values -> record kinds
REF_KIND_RECORDS = {"INSIGHT": "insight", "EPISODE": "episode", "RAW": "raw", "NODE": "node"}
# the fields every embedded record carries: whether it had a vector, or waited for one
HAS_EMBEDDING, WAITING, EMBEDDING = "hasEmbedding", "embeddingWaiting", "embedding"


# --- header -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Header:
    """The first line: what the file is, who wrote it, and how its vectors were made."""

    version: int
    namespace: str
    gql_memory: str
    exported_at: str | None = None
    # EmbeddingSignature.as_json() of the exporting database; present with --with-vectors
    embedding: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        header: dict[str, Any] = {
            "format": FORMAT,
            "version": self.version,
            "gqlMemory": self.gql_memory,
            "namespace": self.namespace,
            "exportedAt": self.exported_at,
        }
        if self.embedding is not None:
            header["embedding"] = self.embedding
        return header

    @classmethod
    def from_json(cls, value: Any) -> Header:
        if not is_header(value):
            raise LineError(1, f"not a {FORMAT} file (its first line is no export header)")
        version = value.get("version")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise LineError(1, "the header's version must be a positive integer")
        if version > VERSION:
            raise LineError(
                1,
                f"the file is of {FORMAT} version {version}, newer than this gql_memory "
                f"reads (version {VERSION}): import it with a newer gql_memory",
            )
        embedding = value.get("embedding")
        if embedding is not None and not isinstance(embedding, dict):
            raise LineError(1, "the header's embedding must be an object")
        return cls(
            version,
            str(value.get("namespace", "")),
            str(value.get("gqlMemory", "")),
            value.get("exportedAt"),
            embedding,
        )


def is_header(value: Any) -> bool:
    return isinstance(value, dict) and value.get("format") == FORMAT


# --- writing and reading records ---------------------------------------------------------------


def dumps(value: dict[str, Any]) -> str:
    """One line of the file (UTF-8 as is, no NaN: the database holds none)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def encode(kind: Kind, row: dict[str, Any]) -> dict[str, Any]:
    """A row of ``kind``'s table (by column) as its record."""
    record: dict[str, Any] = {"kind": kind.name}
    for f in kind.fields:
        value = row[f.column]
        record[f.name] = None if value is None else f.encode(value)
    return record


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_line(data: bytes, line: int) -> Any:
    """A line's JSON value; undecodable bytes, bad JSON, NaN or too deep nesting are a
    LineError naming the line."""
    try:
        text = data.decode("utf-8-sig" if line == 1 else "utf-8")
    except UnicodeDecodeError as exc:
        raise LineError(line, f"not UTF-8 (byte {exc.start + 1} of the line)") from exc
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise LineError(
            line, f"not valid JSON ({exc.msg.removesuffix(' at')} at column {exc.colno})"
        ) from exc
    except RecursionError as exc:
        raise LineError(line, "JSON nested too deeply") from exc
    except ValueError as exc:  # NaN, Infinity; integers of over 4300 digits
        raise LineError(line, f"not valid JSON ({exc})") from exc


@dataclass
class Record:
    """A validated record: its kind, its line, and its values by column (ids as in the file)."""

    kind: Kind
    line: int
    values: dict[str, Any]
    has_embedding: bool = False
    waiting: bool = False
    embedding: list[float] | None = None


def decode(value: Any, line: int) -> Record:
    """A record line as a Record, or a LineError saying what is wrong with it."""
    if not isinstance(value, dict):
        raise LineError(line, "a record must be a JSON object")
    kind = BY_NAME.get(value.get("kind"))  # type: ignore[arg-type]
    if kind is None:
        raise LineError(line, f"unknown record kind {str(value.get('kind'))[:40]!r}")
    known = {"kind", *kind.by_name, *((HAS_EMBEDDING, WAITING, EMBEDDING) if kind.embedded else ())}
    if unknown := sorted(set(value) - known):
        raise LineError(line, f"unknown field {unknown[0][:40]!r} in a {kind.name} record")
    values: dict[str, Any] = {}
    try:
        for f in kind.fields:
            values[f.column] = f.decode(value.get(f.name), f.name)
        record = Record(kind, line, values)
        if kind.embedded:
            record.has_embedding = _flag(value.get(HAS_EMBEDDING, False), HAS_EMBEDDING)
            record.waiting = _flag(value.get(WAITING, False), WAITING)
            if value.get(EMBEDDING) is not None:
                record.embedding = _vector(value[EMBEDDING], EMBEDDING)
        _check_record(record)
    except ValidationError as exc:
        raise LineError(line, str(exc)) from exc
    return record


def _check_record(record: Record) -> None:
    """What the table's constraints would refuse, said before anything is written."""
    values = record.values
    if values.get("valid_to") is not None and values["valid_to"] < values["valid_from"]:
        raise ValidationError("validTo must not be before validFrom")
    if record.kind.name == "edge" and values["source_id"] == values["target_id"]:
        raise ValidationError("an edge must join two different nodes (sourceId = targetId)")
    if "ref_kind" in values and values["ref_kind"] is None and values["ref_id"] is not None:
        raise ValidationError("refId needs a refKind")


def read(path: Path) -> tuple[Header, Iterator[Record]]:
    """The file's header, and its records one by one (the file is streamed, never held)."""
    handle = path.open("rb")
    try:
        first = handle.readline()
        if not first:
            raise LineError(1, f"the file is empty, not a {FORMAT} file")
        header = Header.from_json(parse_line(first, 1))
    except BaseException:
        handle.close()
        raise
    return header, _records(handle)


def _records(handle: Any) -> Iterator[Record]:
    with handle:
        order = 0
        for line, data in enumerate(handle, 2):
            if not data.strip():
                continue
            record = decode(parse_line(data, line), line)
            position = ORDER[record.kind.name]
            if position < order:
                raise LineError(
                    line,
                    f"a {record.kind.name} record after the {KINDS[order].name} records "
                    f"(an export lists its kinds in this order: "
                    f"{', '.join(k.name for k in KINDS)})",
                )
            order = position
            yield record


def sniff(path: Path) -> bool:
    """Whether ``path`` starts with an export header (how `import` tells it from a transcript)."""
    try:
        with path.open("rb") as handle:
            first = handle.readline(1 << 20)
    except OSError:
        return False
    try:
        return is_header(json.loads(first.decode("utf-8-sig")))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
