"""Import an export (interchange/format.py) into a namespace: exactly, atomically, streamed.

The whole import is one transaction: a bad line, a reference that names nothing, a database
refusal, and nothing of the file is left behind. The file is read batch by batch; the ids it
names are only names within the file, remapped to new rows' ids (interchange/ids.py), so no id
of a file reaches a row of another namespace and memory stays constant however large the file.

A namespace that holds data is refused, unless ``Mode.REPLACE`` (erased first, in the same
transaction) or ``Mode.MERGE``: the rows are added alongside, and a row of the file that the
namespace already holds (the same turn, insight, node ... by its natural key) is not added
again but stands for the file's row (interchange/merge.py), so importing a file twice adds
nothing the second time.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    Text,
    bindparam,
    cast,
    delete,
    exists,
    func,
    literal,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import REGCONFIG
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from gql_memory.config import IMPORT_BATCH_SIZE, TSV_MAX_CHARS, Settings
from gql_memory.db import Database
from gql_memory.db.tables import (
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
from gql_memory.memory.embedding_config import EmbeddingSignature, stored_signature
from gql_memory.memory.graph.nodes import MAX_NODE_KEY_BYTES
from gql_memory.memory.interchange.format import (
    BY_NAME,
    KINDS,
    Header,
    Kind,
    LineError,
    Record,
    read,
)
from gql_memory.memory.interchange.ids import IdMap
from gql_memory.memory.interchange.merge import held_rows
from gql_memory.memory.validation import require_namespace
from gql_memory.memory.vectors import vector_literal

Progress = Callable[[int, int], None]  # records stored, records in the file


class Mode(enum.Enum):
    """What to do with a namespace that already holds data."""

    REFUSE = "refuse"
    REPLACE = "replace"
    MERGE = "merge"


@dataclass
class LoadSummary:
    """What an import did: rows read and added per kind, and the vectors' fate."""

    read: dict[str, int] = field(default_factory=lambda: dict.fromkeys(BY_NAME, 0))
    added: dict[str, int] = field(default_factory=lambda: dict.fromkeys(BY_NAME, 0))
    vectors_used: bool = False
    waiting: int = 0  # rows stored waiting for their vectors (memory/waiting.py)
    replaced: bool = False
    seconds: float = 0.0
    vector_note: str = ""


# Two imports into one namespace run one after the other (transaction-scoped lock).
LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtextextended('gql_memory import ' || :ns, 0))"
# Erasing comes in this order: what refers to a row goes before it (edges go with nodes).
ERASE_ORDER = (
    nodes,
    working_memory,
    stale_memory,
    insights,
    episodes,
    raw_dialogue,
    session_state,
    consolidation_actions,
    consolidation_cursors,
)


# What a table holds once per namespace besides its id (its unique indexes), as a record names it.
UNIQUE_KEYS = {
    "raw": "importKey",
    "node": "label and name",
    "edge": "sourceId, targetId and relation (valid now)",
}


class NamespaceNotEmptyError(ValidationError):
    """The target namespace holds data and neither replace nor merge was asked for."""


async def load_export(
    db: Database,
    settings: Settings,
    namespace: str,
    path: Path,
    mode: Mode = Mode.REFUSE,
    *,
    batch_size: int = IMPORT_BATCH_SIZE,
    progress: Progress | None = None,
) -> LoadSummary:
    """Import the export at ``path`` into ``namespace`` (module doc); ``db`` as the owner."""
    require_namespace(namespace)
    started = time.perf_counter()
    total = count_records(path)  # the whole file first: a bad line stops it before any write
    header, records = read(path)
    summary = LoadSummary()
    signature = await stored_signature(db)
    vectors = _usable_vectors(header, signature)
    summary.vectors_used = vectors
    done = 0
    async with db.write(namespace) as conn:
        await conn.execute(text(LOCK_SQL), {"ns": namespace})
        if await _holds_data(conn, namespace):
            if mode is Mode.REFUSE:
                raise NamespaceNotEmptyError(
                    f"namespace {namespace!r} already holds data: import with --replace to "
                    "erase it first, or --merge to add alongside it"
                )
            if mode is Mode.REPLACE:
                await _erase(conn, namespace)
                summary.replaced = True
        ids = IdMap(conn, namespace)
        await ids.create()
        loader = _Loader(conn, ids, settings, namespace, mode is Mode.MERGE, vectors, signature)
        for batch in _batches(records, batch_size):
            await loader.store(batch, summary)
            done += len(batch)
            if progress is not None:
                progress(done, total)
        for kind in KINDS:
            if any(f.deferred for f in kind.fields):
                await ids.resolve_deferred(kind)
    summary.seconds = time.perf_counter() - started
    summary.vector_note = _vector_note(header, signature, vectors, summary.waiting)
    return summary


def count_records(path: Path) -> int:
    """Read and check every line of an export (streamed): a malformed one is a LineError,
    raised before anything is written; else the number of records."""
    _, records = read(path)
    return sum(1 for _ in records)


def _batches(records: Iterator[Record], size: int) -> Iterator[list[Record]]:
    """Consecutive records of one kind, at most ``size`` at a time."""
    pending: list[Record] = []
    for record in records:
        if pending and (len(pending) >= size or pending[0].kind is not record.kind):
            yield pending
            pending = []
        pending.append(record)
    if pending:
        yield pending


def _usable_vectors(header: Header, signature: EmbeddingSignature) -> bool:
    """The file's vectors are stored as they are only when made exactly as the server's."""
    if header.embedding is None:
        return False
    try:
        return EmbeddingSignature.from_json(header.embedding) == signature
    except (KeyError, TypeError, ValueError):
        return False


def _vector_note(header: Header, signature: EmbeddingSignature, used: bool, waiting: int) -> str:
    if not waiting:
        return "vectors: taken from the file" if used else ""
    if header.embedding is None:
        why = "the file holds no vectors (exported without --with-vectors)"
    elif used:
        why = "they waited for their vectors when exported"
    else:
        why = f"the file's vectors were made otherwise than this server's ({signature.describe()})"
    return f"{waiting} rows to embed anew: {why}"


async def _holds_data(conn: AsyncConnection, namespace: str) -> bool:
    for kind in KINDS:
        table = kind.table
        found = await conn.scalar(select(exists().where(table.c.namespace == namespace)))
        if found:
            return True
    return False


async def _erase(conn: AsyncConnection, namespace: str) -> None:
    """Every row of the namespace (within the import's transaction: undone if it fails)."""
    for table in (insights, episodes, edges):  # supersession links within a table
        await conn.execute(
            update(table)
            .where(table.c.namespace == namespace, table.c.superseded_by.is_not(None))
            .values(superseded_by=None)
        )
    await conn.execute(  # aliases of entities (consolidation)
        update(nodes)
        .where(nodes.c.namespace == namespace, nodes.c.merged_into.is_not(None))
        .values(merged_into=None)
    )
    for table in ERASE_ORDER:
        await conn.execute(delete(table).where(table.c.namespace == namespace))


class _Loader:
    """Stores batches of records within the import's transaction."""

    def __init__(
        self,
        conn: AsyncConnection,
        ids: IdMap,
        settings: Settings,
        namespace: str,
        merge: bool,
        vectors: bool,
        signature: EmbeddingSignature,
    ) -> None:
        self.conn = conn
        self.ids = ids
        self.settings = settings
        self.namespace = namespace
        self.merge = merge
        self.vectors = vectors
        self.dim = signature.dim

    async def store(self, batch: list[Record], summary: LoadSummary) -> None:
        kind = batch[0].kind
        summary.read[kind.name] += len(batch)
        if kind.name == "consolidationCursor":
            await self.ids.remap_references(kind, batch)
            summary.added[kind.name] += await self._store_cursor(batch[-1])
            return
        if not kind.has_id:
            summary.added[kind.name] += await self._store_sessions(batch)
            return
        await self.ids.refuse_repeated_ids(kind, batch)
        await self.ids.remap_references(kind, batch)
        existing = (
            await held_rows(self.conn, self.ids, self.namespace, kind, batch) if self.merge else {}
        )
        fresh = [r for r in batch if r.values["id"] not in existing]
        new_ids = await self.ids.allocate(kind.table, len(fresh))
        rows = []
        for record, new_id in zip(fresh, new_ids, strict=True):
            existing[record.values["id"]] = new_id
            rows.append(self._row(record, new_id, summary))
        await self.ids.remember(kind, batch, existing, {id(r) for r in fresh})
        if rows:
            await self._insert_rows(kind, fresh, rows)
            summary.added[kind.name] += len(rows)
        await self.ids.defer(kind, fresh, existing)

    # --- rows -----------------------------------------------------------------------------

    def _row(self, record: Record, new_id: int, summary: LoadSummary) -> dict[str, Any]:
        kind = record.kind
        row = {f.column: record.values[f.column] for f in kind.fields}
        row["id"] = new_id
        row["namespace"] = self.namespace
        for f in kind.fields:
            if f.deferred:
                row[f.column] = None  # set once every row of the kind is in
        if kind.name == "node" and (
            len(f"{self.namespace}{row['label']}{row['name']}".encode()) > MAX_NODE_KEY_BYTES
        ):
            raise LineError(
                record.line,
                f"label and name together must be at most {MAX_NODE_KEY_BYTES} bytes of UTF-8 "
                "(with the namespace's name)",
            )
        if kind.embedded:
            vector = None
            if self.vectors and record.embedding is not None:
                if len(record.embedding) != self.dim:
                    raise LineError(
                        record.line,
                        f"embedding has {len(record.embedding)} dimensions, the header's "
                        f"signature {self.dim}",
                    )
                vector = vector_literal(record.embedding)
            wants = record.has_embedding or record.waiting
            if kind.name == "raw" and not self.settings.embed_raw_dialogue:
                wants = False
            row["vector_text"] = vector
            row["embedding_waiting"] = vector is None and wants
            summary.waiting += row["embedding_waiting"]
            row["tsv_text"] = _searchable(kind, row)
        return row

    async def _insert_rows(
        self, kind: Kind, records: list[Record], rows: list[dict[str, Any]]
    ) -> None:
        """The rows, or a LineError naming the first whose natural key (UNIQUE_KEYS) another
        row holds: a record the file repeats, or a row written meanwhile."""
        table = kind.table
        statement = self._insert(kind).on_conflict_do_nothing().returning(table.c.id)
        stored = set(await self.conn.scalars(statement, rows))
        if len(stored) == len(rows):
            return
        record = next(r for r, row in zip(records, rows, strict=True) if row["id"] not in stored)
        what = UNIQUE_KEYS[kind.name]
        raise LineError(
            record.line,
            f"{kind.name} id {record.values['id']}: its {what} "
            f"{'are' if ' and ' in what else 'is'} another record's",
        )

    def _insert(self, kind: Kind) -> Any:
        table = kind.table
        statement = pg_insert(table)
        if kind.embedded:
            statement = statement.values(
                embedding=cast(bindparam("vector_text", type_=Text), Vector),
                content_tsv=func.to_tsvector(
                    literal(self.settings.text_search_config, Text).cast(REGCONFIG),
                    func.left(bindparam("tsv_text", type_=Text), TSV_MAX_CHARS),
                ),
            )
        return statement

    async def _store_cursor(self, record: Record) -> int:
        """Where the scheduled consolidation left off (its insight, renumbered); a cursor the
        namespace has already stays (its pass looked at what it holds)."""
        statement = pg_insert(consolidation_cursors).values(
            namespace=self.namespace,
            insight_id=record.values["insight_id"],
            updated_at=record.values["updated_at"],
        )
        inserted = await self.conn.scalars(
            statement.on_conflict_do_nothing(index_elements=["namespace"]).returning(
                consolidation_cursors.c.namespace
            )
        )
        return len(inserted.all())

    async def _store_sessions(self, batch: list[Record]) -> int:
        """Event counters per session; merged into one the namespace has, the larger wins
        (a working-memory item's last event is never after its session's counter). Returns how
        many sessions are new."""
        rows = {r.values["session_id"]: r.values["event_counter"] for r in batch}
        statement = pg_insert(session_state).values(
            [
                {"namespace": self.namespace, "session_id": sid, "event_counter": counter}
                for sid, counter in rows.items()
            ]
        )
        inserted = await self.conn.scalars(
            statement.on_conflict_do_update(
                index_elements=["namespace", "session_id"],
                set_={
                    "event_counter": func.greatest(
                        session_state.c.event_counter, statement.excluded.event_counter
                    )
                },
            ).returning(text("xmax = 0"))  # true: inserted, not updated
        )
        return sum(inserted)


def _searchable(kind: Kind, row: dict[str, Any]) -> str:
    """The text the full-text vector is made of, as the layer's own write makes it."""
    if kind.name == "episode":
        return f"{row['query']} {row['reflection']}"
    return str(row["content"])
