"""Export one namespace as JSONL (interchange/format.py): every tenant table, kind by kind.

One REPEATABLE READ transaction, so the file is one consistent moment of the namespace even
while servers write to it; every table is read through a server-side cursor, so memory stays
constant however large the namespace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TextIO

from sqlalchemy import Text, cast, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from gql_memory.db import Database
from gql_memory.memory.embedding_config import stored_signature
from gql_memory.memory.interchange.format import (
    EMBEDDING,
    HAS_EMBEDDING,
    KINDS,
    VERSION,
    WAITING,
    Header,
    Kind,
    dumps,
    encode,
)
from gql_memory.memory.vectors import parse_vector

Progress = Callable[[int, int], None]  # rows written, rows in the namespace
STREAM_ROWS = 500  # rows a cursor fetches at a time


@dataclass(frozen=True)
class ExportSummary:
    """What an export wrote: rows per record kind."""

    counts: dict[str, int]
    with_vectors: bool

    @property
    def rows(self) -> int:
        return sum(self.counts.values())


async def export_namespace(
    db: Database,
    namespace: str,
    out: TextIO,
    *,
    with_vectors: bool = False,
    producer: str = "",
    progress: Progress | None = None,
) -> ExportSummary:
    """Write ``namespace`` to ``out``: the header, then every row of every kind, by id.
    ``producer``: the gql_memory version that writes it (the caller's: memory/ does not
    import the package's facade)."""
    embedding = (await stored_signature(db)).as_json() if with_vectors else None
    header = Header(
        VERSION,
        namespace,
        producer,
        datetime.now(UTC).isoformat(timespec="seconds"),
        embedding,
    )
    out.write(dumps(header.as_json()) + "\n")
    counts = dict.fromkeys((kind.name for kind in KINDS), 0)
    async with db.engine.connect() as raw:
        conn = await raw.execution_options(isolation_level="REPEATABLE READ")
        async with conn.begin():
            await conn.exec_driver_sql("SET TRANSACTION READ ONLY")
            total = await _count(conn, namespace)
            for kind in KINDS:
                result = await conn.stream(
                    _rows(kind, namespace, with_vectors).execution_options(yield_per=STREAM_ROWS)
                )
                async for row in result:
                    out.write(dumps(_record(kind, row._mapping, with_vectors)) + "\n")
                    counts[kind.name] += 1
                    if progress is not None and sum(counts.values()) % STREAM_ROWS == 0:
                        progress(sum(counts.values()), total)
    if progress is not None:
        progress(sum(counts.values()), total)
    return ExportSummary(counts, with_vectors)


def _rows(kind: Kind, namespace: str, with_vectors: bool) -> Any:
    table = kind.table
    columns: list[Any] = [table.c[f.column] for f in kind.fields]
    if kind.embedded:
        columns += [
            table.c.embedding.is_not(None).label("has_embedding"),
            table.c.embedding_waiting,
        ]
        if with_vectors:
            columns.append(cast(table.c.embedding, Text).label("vector"))
    query = select(*columns).where(table.c.namespace == namespace)
    if kind.has_id:
        return query.order_by(table.c.id)
    return query.order_by(*(c for c in table.primary_key.columns))


def _record(kind: Kind, row: Any, with_vectors: bool) -> dict[str, Any]:
    record = encode(kind, row)
    if kind.embedded:
        record[HAS_EMBEDDING] = row["has_embedding"]
        record[WAITING] = row["embedding_waiting"]
        if with_vectors:
            vector = row["vector"]
            record[EMBEDDING] = None if vector is None else parse_vector(vector)
    return record


async def _count(conn: AsyncConnection, namespace: str) -> int:
    """Rows of the namespace (the progress bar's total), in the export's own snapshot."""
    total = 0
    for kind in KINDS:
        found = await conn.scalar(
            select(func.count()).select_from(kind.table).where(kind.table.c.namespace == namespace)
        )
        total += int(found or 0)
    return total
