"""Transcript import into raw dialogue: JSON/JSONL turns and the LoCoMo benchmark format.

Batched (one storeRawDialogue batch, i.e. one transaction, per IMPORT_BATCH_SIZE turns) and
exact: every turn gets a deterministic import key (also shown in its metadata), the database
keeps it unique per namespace and skips a turn whose key is stored (INSERT ... ON CONFLICT DO
NOTHING), so re-running an import, resuming one that stopped half-way, or running the same
import twice at once never stores a turn twice. The key is the LoCoMo ``dia_id`` of the
conversation, a record's own ``id`` when it has one, or else a digest of its session, speaker
and content and how many times that speaker said the same before in that session in the
file — so two identical turns ("ok", "ok") stay two turns, and a turn inserted into a file
later adds exactly that turn on the next run (no key depends on a position).

The whole file is read and validated before anything is written: any malformed input
(undecodable bytes, invalid JSON, NaN, numbers or nesting out of range, wrong types, an id
that repeats in its session) is a ValidationError naming its line (or record) and nothing is
written. An error found only while writing names the line the import stopped at; the turns
before it are stored, and re-running the import resumes there.

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

import sqlalchemy.exc
from sqlalchemy import select

from gql_memory.config import IMPORT_BATCH_SIZE
from gql_memory.db.clauses import any_of
from gql_memory.db.tables import raw_dialogue
from gql_memory.errors import GqlMemoryError, ValidationError
from gql_memory.memory.raw import RawDialogueInput, RawDialogueStore, validated_turn
from gql_memory.memory.validation import (
    require_json_object,
    require_namespace,
    require_session_id,
    require_text,
)

IMPORT_KEY = "import_key"
TURN_ERROR = re.compile(r"^turn (\d+): (.*)$", re.S)
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


class ImportStoppedError(GqlMemoryError):
    """Writing stopped part-way (the database refused a batch); the message names the file
    line to resume from, and a re-run resumes there."""

    code = "SERVICE_UNAVAILABLE"


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


def _text_of(path: Path) -> str:
    """The file as text: UTF-8 (a BOM is allowed); undecodable bytes name their line."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise _invalid(f"line {line}", f"not UTF-8 (byte {exc.start + 1} of the file)") from exc


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _json(text: str, where: str, *, document: bool = False) -> Any:
    """json.loads, refusing NaN/Infinity; every failure is a ValidationError at ``where``,
    or, for a whole ``document`` that is not valid JSON, at the line JSON's own error names."""
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        at = f"line {exc.lineno}" if document else where
        raise _invalid(
            at, f"not valid JSON ({exc.msg.removesuffix(' at')} at column {exc.colno})"
        ) from exc
    except RecursionError as exc:
        raise _invalid(where, "JSON nested too deeply") from exc
    except ValueError as exc:  # NaN, Infinity, -Infinity; integers of over 4300 digits
        raise _invalid(where, f"not valid JSON ({exc})") from exc


def read_transcript(
    path: Path, fmt: ImportFormat | str = ImportFormat.AUTO, session_prefix: str = ""
) -> tuple[ImportFormat, list[RawDialogueInput]]:
    """Parse and validate a whole file into turns (each with its import key and origin)."""
    try:
        fmt = ImportFormat(fmt)
    except ValueError as exc:
        raise ValidationError(
            "format must be auto, export, jsonl, json, locomo, mem0, mcp-memory or letta"
        ) from exc
    raw = _text_of(path)
    document: Any = None
    if fmt is not ImportFormat.JSONL and not (
        fmt is ImportFormat.AUTO and path.suffix.lower() in (".jsonl", ".ndjson")
    ):
        document = _json(raw, "line 1", document=True)
    if fmt is ImportFormat.AUTO:
        fmt = detect_format(path, document)
    if fmt is ImportFormat.JSONL:
        records = [
            (f"line {number}", _json(line, f"line {number}"))
            for number, line in enumerate(raw.splitlines(), 1)
            if line.strip()
        ]
        return fmt, generic_turns(records, session_prefix)
    if fmt is ImportFormat.LOCOMO:
        samples = document if isinstance(document, list) else [document]
        return fmt, locomo_turns(samples, session_prefix)
    if not isinstance(document, list):
        raise _invalid("line 1", "a JSON transcript must be a list of turns")
    return fmt, generic_turns(_located_items(raw), session_prefix)


_SPACE = re.compile(r"[ \t\n\r]*")


def _located_items(raw: str) -> list[tuple[str, Any]]:
    """The items of a JSON list (already known to be valid) with the line each starts on."""
    decoder = json.JSONDecoder(parse_constant=_no_constant)
    items: list[tuple[str, Any]] = []
    line, counted = 1, 0
    position = _skip_space(raw, 0) + 1  # past "["
    while True:
        start = _skip_space(raw, position)
        if raw.startswith("]", start):
            return items
        line, counted = line + raw.count("\n", counted, start), start
        item, end = decoder.raw_decode(raw, start)
        items.append((f"line {line}", item))
        position = _skip_space(raw, end) + 1  # past "," (or "]": then the list is done)
        if raw.startswith("]", position - 1):
            return items


def _skip_space(raw: str, position: int) -> int:
    return _SPACE.match(raw, position).end()  # type: ignore[union-attr]


def _timestamp(value: Any, where: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError) as exc:
            raise _invalid(where, f"timestamp {value!r} is out of range") from exc
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
    said: dict[tuple[str, str, str], int] = {}  # how often each speaker said each thing
    ids: dict[tuple[str, str], str] = {}  # (session, id) -> where it first appeared
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
        own_id = record.get("id")
        if own_id is not None:
            if not isinstance(own_id, str | int) or isinstance(own_id, bool):
                raise _invalid(where, "id must be a string or an integer")
            first = ids.setdefault((session, str(own_id)), where)
            if first != where:
                raise _invalid(where, f"id {own_id!r} of session {session!r} repeats {first}")
            key = _key("id", session, own_id)
        else:
            utterance = (session, speaker, content)
            said[utterance] = occurrence = said.get(utterance, 0) + 1
            key = _key("said", session, speaker, content, occurrence)
        metadata[IMPORT_KEY] = key
        turns.append(
            RawDialogueInput(
                session,
                speaker,
                content,
                metadata,
                _timestamp(record.get("timestamp"), where),
                import_key=key,
                origin=where,
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
    metadata[IMPORT_KEY] = key = f"locomo:{sample_id}:{dia_id}"
    return RawDialogueInput(
        session, speaker, content, metadata, moment, import_key=key, origin=where
    )


class TranscriptImporter:
    """Stores parsed turns in batches, skipping turns already imported."""

    def __init__(self, raw: RawDialogueStore, batch_size: int = IMPORT_BATCH_SIZE) -> None:
        require_namespace(raw.namespace)  # a store built without Memory was never checked
        if not 1 <= batch_size <= 10_000:
            raise ValidationError("batch size must be between 1 and 10000")
        self.raw = raw
        self.batch_size = batch_size

    async def run(
        self, fmt: ImportFormat, turns: list[RawDialogueInput], progress: Progress | None = None
    ) -> ImportSummary:
        _refuse_repeated_keys(turns)
        for turn in turns:  # what storing would refuse, refused before anything is written
            try:
                validated_turn(turn)
            except ValidationError as exc:
                raise _invalid(str(turn.origin), str(exc)) from exc
        started = time.perf_counter()
        stored = batches = 0
        for start in range(0, len(turns), self.batch_size):
            batch = turns[start : start + self.batch_size]
            present = await self._present(batch)  # not embedded again
            fresh = [t for t in batch if _import_key(t) not in present]
            if fresh:
                stored += len(await self._store(fresh))
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

    async def _store(self, batch: list[RawDialogueInput]) -> list[Any]:
        """Store one batch (one transaction); the database skips keys stored meanwhile by a
        concurrent import. A failure names the file line the import stopped at."""
        try:
            return await self.raw.store_many(batch)
        except (GqlMemoryError, sqlalchemy.exc.DBAPIError) as exc:
            message = str(exc.orig if isinstance(exc, sqlalchemy.exc.DBAPIError) else exc)
            where = batch[0].origin
            if (turn := TURN_ERROR.match(message)) and int(turn.group(1)) < len(batch):
                where, message = batch[int(turn.group(1))].origin, turn.group(2)
            raise ImportStoppedError(
                f"{where}: {message.strip()} (the turns before {batch[0].origin} are stored; "
                "fix the cause and run the import again: it resumes there)"
            ) from exc

    async def _present(self, batch: list[RawDialogueInput]) -> set[str]:
        """Import keys of the batch already stored (one index lookup)."""
        async with self.raw.db.read() as conn:
            keys = await conn.scalars(
                select(raw_dialogue.c.import_key).where(
                    raw_dialogue.c.namespace == self.raw.namespace,
                    any_of(raw_dialogue.c.import_key, [_import_key(t) for t in batch]),
                )
            )
            return set(keys)


def _import_key(turn: RawDialogueInput) -> str:
    assert turn.import_key is not None, "every parsed turn has an import key"
    return turn.import_key


def _refuse_repeated_keys(turns: list[RawDialogueInput]) -> None:
    """Two records that are the same turn by their key (an id or a LoCoMo dia_id used twice)
    are an error naming both: the second would silently replace the first."""
    seen: dict[str, str | None] = {}
    for turn in turns:
        first = seen.setdefault(_import_key(turn), turn.origin)
        if first != turn.origin:
            raise _invalid(str(turn.origin), f"the same turn id as {first}")


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
