"""The vocabulary of consolidation, shared by its steps: actions, reports, reasons."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


class ActionKind(StrEnum):
    """What an action did."""

    MERGE = "merge"  # duplicates superseded by one survivor (reason merged)
    SUPERSEDE = "supersede"  # an older value superseded by a newer one (reason updated)
    DIGEST = "digest"  # a quiet session's digest stored as an insight
    ENTITY_MERGE = "entity_merge"  # an automatic entity made the alias of another


class SupersessionReason(StrEnum):
    """Why a fact was closed."""

    CALLER = "caller"  # a caller superseded or invalidated it
    MERGED = "merged"  # consolidation merged it, a duplicate, into another fact
    UPDATED = "updated"  # consolidation found a newer value of the same subject and attribute


@dataclass(frozen=True)
class ConsolidationAction:
    """One journaled action. ``target_id``: the survivor (merge), the newer fact
    (supersede), the digest (digest) or the surviving entity node (entity merge); ``ids``:
    the facts it closed, the turns it digested, or the entity nodes it made aliases."""

    kind: ActionKind
    target_id: int | None
    ids: tuple[int, ...]
    reason: str
    evidence: dict[str, Any]
    id: int | None = None  # None in a dry run: nothing was journaled
    created_at: datetime | None = None
    undone_at: datetime | None = None
    changes: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def undone(self) -> bool:
        return self.undone_at is not None


@dataclass(frozen=True)
class ConsolidationReport:
    """What a pass did (or, in a dry run, would do), and how much it looked at."""

    actions: list[ConsolidationAction]
    dry_run: bool
    insights_examined: int
    entities_examined: int
    sessions_examined: int
    complete: bool = True  # False: a bounded pass stopped early; the next one resumes

    def count(self, kind: ActionKind) -> int:
        return sum(1 for a in self.actions if a.kind is kind)


@dataclass(frozen=True)
class UndoResult:
    """An undone action, and what it left as it was (and why)."""

    action: ConsolidationAction
    restored: tuple[int, ...]
    left: dict[int, str]  # id: why it was not restored (a caller closed it since...)
