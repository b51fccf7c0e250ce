"""L0 raw dialogue: the verbatim transcript of every conversation (seed 004, seed 003 res. 4)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Any

from sqlalchemy import Row, and_, select, text, tuple_

from gql_memory.config import EVENTS_CHANNEL, TSV_MAX_CHARS, Settings
from gql_memory.db import Database
from gql_memory.db.clauses import any_of
from gql_memory.db.engine import namespace_setting
from gql_memory.db.tables import raw_dialogue
from gql_memory.embeddings import EmbeddingProvider
from gql_memory.embeddings.windows import token_counter
from gql_memory.errors import ServiceUnavailableError, ValidationError
from gql_memory.memory.events import process_origin
from gql_memory.memory.extraction.redaction import redact, redact_json
from gql_memory.memory.graph.autograph import turn_links
from gql_memory.memory.offload import run_cpu
from gql_memory.memory.pagination import Page, decode_cursor, encode_cursor
from gql_memory.memory.turn_embedding import TurnRecipe, turn_document, turn_text, turn_vectors
from gql_memory.memory.validation import (
    in_utc,
    require_id,
    require_json_object,
    require_page_size,
    require_session_id,
    require_storable_moment,
    require_text,
)
from gql_memory.memory.vectors import vector_literal
from gql_memory.memory.waiting import note_waiting
from gql_memory.memory.working.decay import decay_rate, delete_threshold

log = logging.getLogger(__name__)

DATE_RANGE = re.compile(r"^(\d{4}-\d{2}-\d{2}):(\d{4}-\d{2}-\d{2})$")
DATE_RANGE_HELP = "Invalid date_range format. Expected: YYYY-MM-DD:YYYY-MM-DD"
MAX_BATCH = 10_000
_RETURNED = (
    raw_dialogue.c.id,
    raw_dialogue.c.session_id,
    raw_dialogue.c.speaker,
    raw_dialogue.c.content,
    raw_dialogue.c.metadata,
    raw_dialogue.c.timestamp,
)


@dataclass(frozen=True)
class RawDialogue:
    """One stored dialogue turn."""

    id: int
    session_id: str
    speaker: str
    content: str
    metadata: dict[str, Any] | None
    timestamp: datetime

    @classmethod
    def from_row(cls, row: Row[Any] | Any) -> RawDialogue:
        m = row._mapping
        return cls(
            id=m["id"],
            session_id=m["session_id"],
            speaker=m["speaker"],
            content=m["content"],
            metadata=m["metadata"],
            timestamp=m["timestamp"],
        )


@dataclass(frozen=True)
class RawDialogueInput:
    """A turn to store; ``timestamp`` defaults to now (set it when importing transcripts)."""

    session_id: str
    speaker: str
    content: str
    metadata: dict[str, Any] | None = None
    timestamp: datetime | None = None
    # Transcript imports: the turn's key, unique per namespace (a turn whose key is already
    # stored is skipped, atomically), and where in the file it came from (for errors).
    import_key: str | None = None
    origin: str | None = None


def parse_date_range(value: str) -> tuple[datetime, datetime]:
    """'YYYY-MM-DD:YYYY-MM-DD' -> [start of first day, end of last day], both in UTC."""
    match = DATE_RANGE.match(value.strip()) if isinstance(value, str) else None
    if not match:
        raise ValidationError(DATE_RANGE_HELP)
    try:
        start, end = (date.fromisoformat(part) for part in match.groups())
    except ValueError as exc:
        raise ValidationError(f"{DATE_RANGE_HELP} ({exc})") from exc
    if end < start:
        raise ValidationError("date_range end must not be before its start")
    return datetime.combine(start, time.min, UTC), datetime.combine(end, time.max, UTC)


def _aware(moment: datetime, field: str) -> datetime:
    """The moment in UTC (naive means UTC); one PostgreSQL can store, else BAD_USER_INPUT."""
    if not isinstance(moment, datetime):
        raise ValidationError(f"{field} must be a date-time")
    return in_utc(moment if moment.tzinfo else moment.replace(tzinfo=UTC), field)


def _storable(moment: datetime, field: str) -> datetime:
    """A moment to store: in UTC and a day inside Python's own range (see EARLIEST)."""
    return require_storable_moment(_aware(moment, field), field)


def validated_turn(turn: RawDialogueInput) -> dict[str, Any]:
    """The turn as a row to insert, or ValidationError (what storing it would refuse)."""
    return {
        "session_id": require_session_id(turn.session_id),
        "speaker": require_text(turn.speaker, "speaker", max_length=50),
        "content": require_text(turn.content, "content"),
        "metadata": require_json_object(turn.metadata, "metadata"),
        "timestamp": _storable(turn.timestamp, "timestamp") if turn.timestamp else None,
        "import_key": turn.import_key,
    }


# The newest stored turn of each session at or before a moment (now when NULL): the context
# of the first turn of that session in a new batch.
PREVIOUS_TURNS_SQL = """
SELECT u.session_id, p.speaker, p.content
FROM unnest(CAST(:sids AS text[]), CAST(:ts AS timestamptz[])) AS u(session_id, ts)
JOIN LATERAL (
    SELECT r.speaker, r.content FROM raw_dialogue r
    WHERE r.namespace = :ns AND r.session_id = u.session_id
      AND r."timestamp" <= coalesce(u.ts, 'infinity')
    ORDER BY r."timestamp" DESC, r.id DESC
    LIMIT 1
) p ON true
"""
# Storing turns is one statement in autocommit (migration 0010): insert them (skipping import
# keys already stored), graph them, count each session's events and sweep it, NOTIFY.
STORE_TURNS_SQL = """
SELECT * FROM gql_memory_store_turns(
    CAST($1 AS text), CAST($2 AS text), CAST($3 AS int),
    CAST($4 AS text[]), CAST($5 AS text[]), CAST($6 AS text[]), CAST($7 AS text[]),
    CAST($8 AS timestamptz[]), CAST($9 AS text[]), CAST($10 AS text[]),
    CAST($11 AS boolean), CAST($12 AS bigint[]), CAST($13 AS text[]), CAST($14 AS text[]),
    CAST($15 AS float8), CAST($16 AS float8), CAST($17 AS float8), CAST($18 AS float8),
    CAST($19 AS text), CAST($20 AS text))
"""


# Marks the turns just stored whose vectors are still to come (migration 0016).
MARK_WAITING_SQL = """
UPDATE raw_dialogue SET embedding_waiting = true
WHERE namespace = $1 AND id = ANY(CAST($2 AS bigint[])) AND embedding IS NULL
"""


def _log_decayed(namespace: str, decayed: Sequence[int]) -> None:
    """Seed 000's log line for the working memory that storing turns let decay (the turns
    are write events of their sessions, migration 0012): ids and reason, never content."""
    if decayed:
        log.info(
            "working memory %s archived to stale (DECAY_EVICTION, stored turns)",
            list(decayed),
            extra={
                "event": "working_memory_decay",
                "namespace": namespace,
                "reason": "DECAY_EVICTION",
                "original_ids": list(decayed),
            },
        )


class RawDialogueStore:
    """Store and read raw dialogue turns of one namespace."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        namespace: str,
        embedder: EmbeddingProvider | None = None,
    ) -> None:
        self.db = db
        self.settings = settings
        self.namespace = namespace
        self.embedder = embedder

    async def store(
        self,
        session_id: str,
        speaker: str,
        content: str,
        metadata: dict[str, Any] | None = None,
        timestamp: datetime | None = None,
    ) -> RawDialogue:
        """Store one turn and return it with its id and UTC timestamp."""
        turn = RawDialogueInput(session_id, speaker, content, metadata, timestamp)
        return (await self.store_many([turn]))[0]

    async def store_many(self, turns: Sequence[RawDialogueInput]) -> list[RawDialogue]:
        """Store many turns in one transaction: all of them or, on any invalid turn, none.

        Turns with an ``import_key`` already stored in the namespace are skipped (not
        returned): concurrent imports of one file store each turn once."""
        if not turns:
            raise ValidationError("input must contain at least one turn")
        if len(turns) > MAX_BATCH:
            raise ValidationError(f"input must contain at most {MAX_BATCH} turns")
        rows = []
        for index, turn in enumerate(turns):
            try:
                rows.append(validated_turn(turn))
            except ValidationError as exc:
                if len(turns) == 1:
                    raise
                raise ValidationError(f"turn {index}: {exc}") from exc
        if self.settings.redact_raw_dialogue:  # the optional redaction gate (SPEC §3.8)
            await run_cpu(sum(len(r["content"]) for r in rows), _redact_in_place, rows)
        embeddings, waiting = await self._embed(rows)
        async with self.db.statement() as conn:
            if not waiting:
                stored = await conn.fetch(STORE_TURNS_SQL, *self._store_arguments(rows, embeddings))
            else:  # the embedder is down: the turns are stored waiting for their vectors
                async with conn.transaction():
                    await conn.execute(namespace_setting(self.namespace))
                    stored = await conn.fetch(
                        STORE_TURNS_SQL, *self._store_arguments(rows, embeddings)
                    )
                    await conn.execute(
                        MARK_WAITING_SQL,
                        self.namespace,
                        [r[0] for r in stored if (r[2], r[3]) in waiting],
                    )
        if stored:  # seed 004's log line, one per call (a batch names its ids and sessions)
            log.info(
                "stored raw dialogue: ids %s (session %s)",
                ",".join(str(r[0]) for r in stored[:20]) + ("..." if len(stored) > 20 else ""),
                ",".join(sorted({r[1] for r in stored})[:5]),
                extra={
                    "event": "raw_dialogue_stored",
                    "namespace": self.namespace,
                    "ids": [r[0] for r in stored],
                    "skipped": len(rows) - len(stored),
                },
            )
            _log_decayed(self.namespace, stored[0][6])
        return [
            RawDialogue(
                id=r[0],
                session_id=r[1],
                speaker=r[2],
                content=r[3],
                metadata=None if r[4] is None else json.loads(r[4]),
                timestamp=r[5],
            )
            for r in stored
        ]

    def _store_arguments(
        self, rows: list[dict[str, Any]], embeddings: list[str | None]
    ) -> tuple[Any, ...]:
        """The arguments of STORE_TURNS_SQL, in order."""
        settings = self.settings
        links: tuple[list[int], list[str], list[str]] = ([], [], [])
        if settings.auto_graph:
            links = turn_links([(r["speaker"], r["content"]) for r in rows])
        return (
            self.namespace,
            settings.text_search_config,
            TSV_MAX_CHARS,
            [r["session_id"] for r in rows],
            [r["speaker"] for r in rows],
            [r["content"] for r in rows],
            [None if r["metadata"] is None else json.dumps(r["metadata"]) for r in rows],
            [r["timestamp"] for r in rows],
            embeddings,
            [r["import_key"] for r in rows],
            settings.auto_graph,
            *links,
            settings.critical_importance,
            decay_rate(settings),
            settings.mention_boost,
            delete_threshold(settings),
            EVENTS_CHANNEL if settings.live_events else None,
            process_origin(),
        )

    async def _embed(
        self, rows: list[dict[str, Any]]
    ) -> tuple[list[str | None], set[tuple[str, str]]]:
        """Embeddings for hybrid search, when enabled, and the (speaker, content) of the turns
        that wait for theirs. The transcript matters more than its vectors: if the provider
        is down, turns are stored waiting (memory.waiting embeds them once it is back); a
        turn longer than GQL_MEMORY_EMBEDDING_MAX_CHARS is stored without (the text leg
        finds it)."""
        if not self.settings.embed_raw_dialogue or self.embedder is None:
            return [None] * len(rows), set()
        documents = await self._documents(rows)
        bound = self.settings.embedding_max_chars
        embeddable = [i for i, d in enumerate(documents) if len(d) <= bound]
        if len(embeddable) < len(documents):
            log.warning(
                "storing %d turns longer than %d characters without embeddings "
                "(GQL_MEMORY_EMBEDDING_MAX_CHARS)",
                len(documents) - len(embeddable),
                bound,
            )
        embeddings: list[str | None] = [None] * len(rows)
        if not embeddable:
            return embeddings, set()
        try:
            chosen = [documents[i] for i in embeddable]
            vectors = await turn_vectors(
                self.embedder,
                chosen,
                [turn_text(rows[i]["speaker"], rows[i]["content"]) for i in embeddable]
                if TurnRecipe.from_settings(self.settings).pooled_alone
                else chosen,
            )
        except ServiceUnavailableError as exc:
            log.warning("storing %d turns waiting for their embeddings: %s", len(embeddable), exc)
            note_waiting(len(embeddable))
            return embeddings, {(rows[i]["speaker"], rows[i]["content"]) for i in embeddable}
        for i, vector in zip(embeddable, vectors, strict=True):
            embeddings[i] = vector_literal(vector)
        return embeddings, set()

    async def _documents(self, rows: list[dict[str, Any]]) -> list[str]:
        """What is embedded for each turn beside the turn alone (see ``turn_vectors``): the
        turn after the one before it in its session (contextual document embedding: "Yes, it
        was amazing!" carries its subject), or the turn alone only when
        GQL_MEMORY_EMBED_RAW_CONTEXT is off."""
        recipe = TurnRecipe.from_settings(self.settings)
        if not recipe.context_tokens or self.embedder is None:
            return [turn_text(r["speaker"], r["content"]) for r in rows]
        tokens = token_counter(self.embedder)
        previous: dict[str, str | None] = {}
        firsts: dict[str, datetime | None] = {}
        for r in rows:
            firsts.setdefault(r["session_id"], r["timestamp"])
        async with self.db.read() as conn:
            found = await conn.execute(
                text(PREVIOUS_TURNS_SQL),
                {
                    "ns": self.namespace,
                    "sids": list(firsts),
                    "ts": list(firsts.values()),
                },
            )
            previous.update((p.session_id, turn_text(p.speaker, p.content)) for p in found)
        documents = []
        for r in rows:
            current = turn_text(r["speaker"], r["content"])
            documents.append(turn_document(previous.get(r["session_id"]), current, tokens, recipe))
            previous[r["session_id"]] = current
        return documents

    async def get(self, turn_id: Any) -> RawDialogue | None:
        turn_id = require_id(turn_id)
        async with self.db.read() as conn:
            row = (
                await conn.execute(
                    select(*_RETURNED).where(
                        raw_dialogue.c.id == turn_id, raw_dialogue.c.namespace == self.namespace
                    )
                )
            ).first()
        return RawDialogue.from_row(row) if row else None

    async def get_many(self, ids: Sequence[int]) -> dict[int, RawDialogue]:
        """Turns by id (for batched loaders); missing ids are absent."""
        if not ids:
            return {}
        async with self.db.read() as conn:
            rows = (
                await conn.execute(
                    select(*_RETURNED).where(
                        raw_dialogue.c.namespace == self.namespace, any_of(raw_dialogue.c.id, ids)
                    )
                )
            ).all()
        return {row.id: RawDialogue.from_row(row) for row in rows}

    async def list(
        self,
        *,
        session_id: str | None = None,
        from_: datetime | None = None,
        to: datetime | None = None,
        date_range: str | None = None,
        speaker: str | None = None,
        first: int | None = None,
        after: str | None = None,
    ) -> Page[RawDialogue]:
        """Newest first; filters combine with AND. No match is an empty page."""
        limit = require_page_size(
            first, self.settings.default_page_size, self.settings.max_page_size
        )
        if date_range is not None:
            if from_ is not None or to is not None:
                raise ValidationError("Use either dateRange or from/to, not both")
            from_, to = parse_date_range(date_range)
        if from_ is not None and to is not None and _aware(to, "to") < _aware(from_, "from"):
            raise ValidationError("to must not be before from")
        conditions = [raw_dialogue.c.namespace == self.namespace]
        if session_id is not None:
            conditions.append(raw_dialogue.c.session_id == require_session_id(session_id))
        if speaker is not None:
            conditions.append(raw_dialogue.c.speaker == require_text(speaker, "speaker"))
        if from_ is not None:
            conditions.append(raw_dialogue.c.timestamp >= _aware(from_, "from"))
        if to is not None:
            conditions.append(raw_dialogue.c.timestamp <= _aware(to, "to"))
        if after is not None:
            moment, row_id = decode_cursor(after)
            conditions.append(
                tuple_(raw_dialogue.c.timestamp, raw_dialogue.c.id) < tuple_(moment, row_id)
            )
        query = (
            select(*_RETURNED)
            .where(and_(*conditions))
            .order_by(raw_dialogue.c.timestamp.desc(), raw_dialogue.c.id.desc())
            .limit(limit + 1)
        )
        async with self.db.read() as conn:
            rows = (await conn.execute(query)).all()
        items = [RawDialogue.from_row(r) for r in rows[:limit]]
        return Page(
            items=items,
            cursors=[encode_cursor(i.timestamp, i.id) for i in items],
            has_next_page=len(rows) > limit,
            has_previous_page=after is not None,
        )


def _redact_in_place(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        row["content"] = redact(row["content"]).text
        row["metadata"] = redact_json(row["metadata"])[0]
