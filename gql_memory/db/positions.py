"""WAL positions (LSNs) and the read sessions that carry them.

A write on the primary reports the position of its commit; a read that must see it names that
position, and a replica serves the read once it has replayed that far
(gql_memory.db.replicas). A ``ReadSession`` says what the reads of one request, or of one
library store, must see; the request's session travels in a context variable, so that the
database layer finds it without it being passed through the domain code.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

_LSN = re.compile(r"^([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})$")


def parse_lsn(value: str) -> int:
    """A WAL position as PostgreSQL writes it ('16/B374D848') -> an int; ValueError else."""
    match = _LSN.match(value.strip())
    if match is None:
        raise ValueError(f"not a WAL position (LSN) such as 0/3000060: {value[:40]!r}")
    return (int(match.group(1), 16) << 32) | int(match.group(2), 16)


def format_lsn(value: int) -> str:
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"


@dataclass
class ReadSession:
    """What the reads of one request, or of one library store, must see.

    ``after_lsn``: a commit position every read must include (0: none). ``prefer_primary``:
    read on the primary while it is up (a mutation reads the newest state, never a
    replica's). ``last_commit_lsn``: the newest commit made under this session.
    """

    after_lsn: int = 0
    prefer_primary: bool = False
    last_commit_lsn: int = 0

    def committed(self, lsn: int) -> None:
        """A write under this session committed at ``lsn``: later reads must see it."""
        self.last_commit_lsn = max(self.last_commit_lsn, lsn)
        self.after_lsn = max(self.after_lsn, lsn)


_SESSION: ContextVar[ReadSession | None] = ContextVar("gql_memory_read_session", default=None)


@contextmanager
def read_session(session: ReadSession) -> Iterator[ReadSession]:
    """Run the enclosed database work (and the tasks it spawns) under ``session``."""
    token = _SESSION.set(session)
    try:
        yield session
    finally:
        _SESSION.reset(token)


def current_session() -> ReadSession | None:
    return _SESSION.get()
