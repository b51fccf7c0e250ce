"""Transcript import into raw dialogue: JSON/JSONL turns and the LoCoMo benchmark format.

Batched (one storeRawDialogue batch, i.e. one transaction, per IMPORT_BATCH_SIZE turns) and
idempotent: every turn gets a deterministic ``import_key`` in its metadata, and turns whose
key is already stored in the namespace are skipped, so re-running an import (or resuming one
that stopped half-way) never duplicates a turn. The key is the LoCoMo ``dia_id`` of the
conversation, a record's own ``id`` when it has one, or else a digest of its session, its
position within that session in the file, speaker and content — so two identical turns
("ok", "ok") stay two turns, and turns appended to a file later are imported on the next run.
The whole file is parsed and validated before anything is written.

Generic format, JSONL (one object per line) or a JSON list:
``{"sessionId": "chat-1", "speaker": "user", "content": "Hi", "metadata": {...},
"timestamp": "2024-05-01T10:00:00Z", "id": "optional-stable-id"}``.

LoCoMo: a list of samples ``{sample_id, conversation: {speaker_a, speaker_b, session_<n>:
[{speaker, dia_id, text, blip_caption?}], session_<n>_date_time: "1:56 pm on 8 May, 2023"}}``.
Following the benchmark's retrieval protocol (shared data README), a turn becomes content
``"<speaker>: <text>"`` plus ``" [shares a photo: <blip_caption>]"``; session
``<prefix><sample_id>-session_<n>``; metadata ``dia_id``, ``sample_id``, ``session``,
``session_date_time``; timestamp the session's date plus one second per turn, so that
turns keep their order.
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import text

from gql_memory.config import IMPORT_BATCH_SIZE
from gql_memory.errors import ValidationError
from gql_memory.memory.raw import RawDialogueInput, RawDialogueStore
from gql_memory.memory.validation import require_json_object, require_session_id, require_text

IMPORT_KEY = "import_key"
SESSION_KEY = re.compile(r"^session_(\d+)$")
LOCOMO_DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y")

Progress = Callable[[int, int], None]


class ImportFormat(enum.Enum):
    AUTO = "auto"
    JSONL = "jsonl"
    JSON = "json"
    LOCOMO = "locomo"


@dataclass(frozen=True)
class ImportSummary:
    """What an import did."""

    format: ImportFormat
    read: int
    stored: int
    skipped: int
    sessions: int
    batches: int
    seconds: float

    def line(self, namespace: str) -> str:
        return (
            f"imported {self.stored} of {self.read} turns ({self.skipped} already present) "
            f"in {self.sessions} sessions of namespace '{namespace}' from {self.format.value} "
            f"in {self.batches} batches, {self.seconds:.1f} s"
        )


def _invalid(where: str, message: str) -> ValidationError:
    return ValidationError(f"{where}: {message}")


def detect_format(path: Path, document: Any | None) -> ImportFormat:
    """jsonl by extension; a JSON list of objects with a ``conversation`` is LoCoMo."""
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return ImportFormat.JSONL
    samples = document if isinstance(document, list) else [document]
    if samples and isinstance(samples[0], dict) and "conversation" in samples[0]:
        return ImportFormat.LOCOMO
    return ImportFormat.JSON


def read_transcript(
    path: Path, fmt: ImportFormat | str = ImportFormat.AUTO, session_prefix: str = ""
) -> tuple[ImportFormat, list[RawDialogueInput]]:
    """Parse and validate a whole file into turns (each with its import key)."""
    try:
        fmt = ImportFormat(fmt)
    except ValueError as exc:
        raise ValidationError("format must be auto, jsonl, json or locomo") from exc
    raw = path.read_text(encoding="utf-8")
    document: Any = None
    if fmt is not ImportFormat.JSONL and not (
        fmt is ImportFormat.AUTO and path.suffix.lower() in (".jsonl", ".ndjson")
    ):
        try:
            document = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"{path}: not valid JSON ({exc})") from exc
    if fmt is ImportFormat.AUTO:
        fmt = detect_format(path, document)
    if fmt is ImportFormat.JSONL:
        records = []
        for number, line in enumerate(raw.splitlines(), 1):
            if line.strip():
                try:
                    records.append((f"line {number}", json.loads(line)))
                except json.JSONDecodeError as exc:
                    raise _invalid(f"line {number}", f"not valid JSON ({exc})") from exc
        return fmt, generic_turns(records, session_prefix)
    if fmt is ImportFormat.LOCOMO:
        samples = document if isinstance(document, list) else [document]
        return fmt, locomo_turns(samples, session_prefix)
    if not isinstance(document, list):
        raise ValidationError(f"{path}: a JSON transcript must be a list of turns")
    return fmt, generic_turns(
        [(f"record {i}", r) for i, r in enumerate(document, 1)], session_prefix
    )


def _timestamp(value: Any, where: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, UTC)
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as exc:
            raise _invalid(where, f"timestamp {value!r} is not ISO-8601") from exc
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    raise _invalid(where, "timestamp must be an ISO-8601 string or epoch seconds")


def _key(*parts: Any) -> str:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:32]


def generic_turns(records: Iterable[tuple[str, Any]], prefix: str) -> list[RawDialogueInput]:
    turns = []
    position: dict[str, int] = {}
    for where, record in records:
        if not isinstance(record, dict):
            raise _invalid(where, "a turn must be a JSON object")
        try:
            session = require_session_id(
                prefix + str(record.get("sessionId", record.get("session_id", "")))
            )
            speaker = require_text(record.get("speaker"), "speaker", max_length=50)
            content = require_text(record.get("content"), "content")
            metadata = dict(require_json_object(record.get("metadata"), "metadata") or {})
        except ValidationError as exc:
            raise _invalid(where, str(exc)) from exc
        position[session] = position.get(session, 0) + 1
        own_id = record.get("id")
        metadata[IMPORT_KEY] = (
            _key("id", session, own_id)
            if own_id is not None
            else _key("turn", session, position[session], speaker, content)
        )
        turns.append(
            RawDialogueInput(
                session, speaker, content, metadata, _timestamp(record.get("timestamp"), where)
            )
        )
    return turns


def locomo_date(value: Any, where: str) -> datetime:
    for fmt in LOCOMO_DATE_FORMATS:
        try:
            return datetime.strptime(str(value), fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise _invalid(where, f"session date {value!r} is not like '1:56 pm on 8 May, 2023'")


def locomo_turns(samples: Sequence[Any], prefix: str) -> list[RawDialogueInput]:
    turns = []
    for index, sample in enumerate(samples, 1):
        conversation = sample.get("conversation") if isinstance(sample, dict) else None
        if not isinstance(conversation, dict):
            raise _invalid(f"sample {index}", "a LoCoMo sample needs a 'conversation' object")
        sample_id = str(sample.get("sample_id") or f"sample-{index}")
        numbers = sorted(int(m.group(1)) for key in conversation if (m := SESSION_KEY.match(key)))
        for number in numbers:
            where = f"{sample_id} session_{number}"
            date_text = str(conversation.get(f"session_{number}_date_time"))
            started = locomo_date(date_text, where)
            session = require_session_id(f"{prefix}{sample_id}-session_{number}")
            listed = conversation[f"session_{number}"]
            if not isinstance(listed, list):
                raise _invalid(where, "a session must be a list of turns")
            for offset, turn in enumerate(listed):
                turns.append(
                    _locomo_turn(
                        turn,
                        f"{where} turn {offset + 1}",
                        sample_id,
                        number,
                        session,
                        date_text,
                        started + timedelta(seconds=offset),
                    )
                )
    return turns


def _locomo_turn(
    turn: Any,
    where: str,
    sample_id: str,
    number: int,
    session: str,
    date_text: str,
    moment: datetime,
) -> RawDialogueInput:
    if not isinstance(turn, dict):
        raise _invalid(where, "a turn must be a JSON object")
    try:
        speaker = require_text(turn.get("speaker"), "speaker", max_length=50)
        said = require_text(turn.get("text"), "text")
        dia_id = require_text(turn.get("dia_id"), "dia_id")
    except ValidationError as exc:
        raise _invalid(where, str(exc)) from exc
    content = f"{speaker}: {said}"
    metadata: dict[str, Any] = {
        "source": "locomo",
        "sample_id": sample_id,
        "dia_id": dia_id,
        "session": number,
        "session_date_time": date_text,
    }
    if turn.get("blip_caption"):
        content += f" [shares a photo: {turn['blip_caption']}]"
        metadata["blip_caption"] = turn["blip_caption"]
    metadata[IMPORT_KEY] = f"locomo:{sample_id}:{dia_id}"
    return RawDialogueInput(session, speaker, content, metadata, moment)


class TranscriptImporter:
    """Stores parsed turns in batches, skipping turns already imported."""

    def __init__(self, raw: RawDialogueStore, batch_size: int = IMPORT_BATCH_SIZE) -> None:
        if not 1 <= batch_size <= 10_000:
            raise ValidationError("batch size must be between 1 and 10000")
        self.raw = raw
        self.batch_size = batch_size

    async def run(
        self, fmt: ImportFormat, turns: list[RawDialogueInput], progress: Progress | None = None
    ) -> ImportSummary:
        started = time.perf_counter()
        stored = batches = 0
        for start in range(0, len(turns), self.batch_size):
            batch = turns[start : start + self.batch_size]
            present = await self._present(batch)
            fresh = [t for t in batch if _import_key(t) not in present]
            fresh = list({_import_key(t): t for t in fresh}.values())  # repeats within a file
            if fresh:
                await self.raw.store_many(fresh)
                stored += len(fresh)
                batches += 1
            if progress:
                progress(start + len(batch), len(turns))
        return ImportSummary(
            format=fmt,
            read=len(turns),
            stored=stored,
            skipped=len(turns) - stored,
            sessions=len({t.session_id for t in turns}),
            batches=batches,
            seconds=time.perf_counter() - started,
        )

    async def _present(self, batch: list[RawDialogueInput]) -> set[str]:
        """Import keys of the batch already stored (through the session index)."""
        async with self.raw.db.read() as conn:
            rows = await conn.execute(
                text(
                    "SELECT metadata->>'import_key' FROM raw_dialogue "
                    "WHERE namespace = :ns AND session_id = ANY(:sessions) "
                    "AND metadata->>'import_key' = ANY(:keys)"
                ),
                {
                    "ns": self.raw.namespace,
                    "sessions": sorted({t.session_id for t in batch}),
                    "keys": [_import_key(t) for t in batch],
                },
            )
            return set(rows.scalars())


def _import_key(turn: RawDialogueInput) -> str:
    return str((turn.metadata or {})[IMPORT_KEY])


async def import_file(
    raw: RawDialogueStore,
    path: Path,
    fmt: ImportFormat | str = ImportFormat.AUTO,
    session_prefix: str = "",
    progress: Progress | None = None,
    batch_size: int = IMPORT_BATCH_SIZE,
) -> ImportSummary:
    """Parse ``path`` and store its turns in ``raw``'s namespace; see the module docstring."""
    detected, turns = read_transcript(path, fmt, session_prefix)
    return await TranscriptImporter(raw, batch_size).run(detected, turns, progress)
