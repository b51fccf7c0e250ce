"""LongMemEval-S questions as the recall benchmark reads them (shared/data/longmemeval).

Each file holds a question, its type and date, and its haystack: sessions of user / assistant
turns with their ids and dates; turns holding evidence have ``has_answer``. manifest.json lists
the files with their sha256, which is checked.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gql_memory import RawDialogueInput

DATE = re.compile(r"^(\d{4})/(\d{2})/(\d{2}) \(\w+\) (\d{2}):(\d{2})$")
TURN_KEY = "lme_turn"  # the turn's "session index:turn index", kept in its metadata


@dataclass(frozen=True)
class Turn:
    """One non-empty turn of a haystack, where it sits, and whether it holds evidence."""

    session_index: int
    turn_index: int
    session_id: str
    role: str
    content: str
    timestamp: datetime
    has_answer: bool

    @property
    def key(self) -> str:
        """'session index:turn index', unique in the question (a session id may repeat)."""
        return f"{self.session_index}:{self.turn_index}"

    def as_input(self) -> RawDialogueInput:
        """The turn to store, its key in its metadata."""
        return RawDialogueInput(
            session_id=self.session_id,
            speaker=self.role,
            content=self.content,
            metadata={TURN_KEY: self.key},
            timestamp=self.timestamp,
        )


@dataclass(frozen=True)
class Question:
    """One question with its haystack's non-empty turns."""

    id: str
    type: str
    question: str
    date: datetime
    answer_session_ids: frozenset[str]
    turns: tuple[Turn, ...]
    sha256: str  # of its file: a record of another version of the question does not count

    @property
    def evidence(self) -> set[str]:
        """The keys of the turns that hold evidence (``has_answer``)."""
        return {turn.key for turn in self.turns if turn.has_answer}


def parse_date(value: str) -> datetime:
    """'2023/05/20 (Sat) 02:21' as an aware datetime (UTC)."""
    match = DATE.match(value.strip())
    if not match:
        raise ValueError(f"not a LongMemEval date: {value!r}")
    year, month, day, hour, minute = (int(part) for part in match.groups())
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def load_questions(directory: Path) -> list[Question]:
    """The questions manifest.json lists, in its order, each checked against its sha256."""
    manifest = json.loads((directory / "manifest.json").read_text())
    questions = []
    for item in manifest["items"]:
        raw = (directory / item["file"]).read_bytes()
        digest = hashlib.sha256(raw).hexdigest()
        if digest != item["sha256"]:
            raise ValueError(f"{item['file']}: sha256 {digest} is not the manifest's")
        questions.append(question_of(json.loads(raw), digest))
    return questions


def question_of(data: dict[str, Any], digest: str) -> Question:
    """A question file's content; a turn's time is its session's date plus its position in
    seconds (the turns of a session keep their order)."""
    turns = []
    sessions = zip(
        data["haystack_session_ids"], data["haystack_dates"], data["haystack_sessions"], strict=True
    )
    for s, (session_id, date, session) in enumerate(sessions):
        start = parse_date(date)
        for t, turn in enumerate(session):
            if turn["content"].strip():
                turns.append(
                    Turn(
                        s,
                        t,
                        session_id,
                        turn["role"],
                        turn["content"],
                        start + timedelta(seconds=t),
                        bool(turn.get("has_answer")),
                    )
                )
    return Question(
        id=data["question_id"],
        type=data["question_type"],
        question=data["question"],
        date=parse_date(data["question_date"]),
        answer_session_ids=frozenset(data["answer_session_ids"]),
        turns=tuple(turns),
        sha256=digest,
    )
