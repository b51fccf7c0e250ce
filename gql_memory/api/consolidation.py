"""GraphQL for consolidation: run a pass, read the journal, undo an action."""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Annotated

import strawberry
from strawberry.scalars import JSON

from gql_memory.api.info import Info
from gql_memory.api.pagination import Connection, to_connection
from gql_memory.memory import consolidation


@strawberry.enum(description="What a consolidation action did.")
class ConsolidationActionKind(Enum):
    MERGE = strawberry.enum_value(
        "merge", description="Duplicates were superseded by one survivor (reason merged)."
    )
    SUPERSEDE = strawberry.enum_value(
        "supersede",
        description="Older values were superseded by a newer fact of the same subject and "
        "attribute (reason updated).",
    )
    DIGEST = strawberry.enum_value(
        "digest", description="A quiet session's digest was stored as an insight."
    )
    ENTITY_MERGE = strawberry.enum_value(
        "entity_merge",
        description="Automatic entities that name one thing became aliases of one of them.",
    )


@strawberry.type(description="One journaled consolidation action, with its reason and evidence.")
class ConsolidationAction:
    id: strawberry.ID | None = strawberry.field(
        description="Journal id (for undoConsolidation); null in a dry run."
    )
    kind: ConsolidationActionKind = strawberry.field(description="What it did.")
    target_id: strawberry.ID | None = strawberry.field(
        description="The survivor (merge), the newer fact (supersede), the digest insight "
        "(digest) or the surviving entity node (entity merge); null for a digest in a dry run."
    )
    ids: list[strawberry.ID] = strawberry.field(
        description="What it closed or absorbed: the merged or superseded insights, the "
        "aliased entity nodes; for a digest, the last turn it covers."
    )
    reason: str = strawberry.field(description="Why, in one sentence.")
    evidence: JSON = strawberry.field(
        description="What the decision rested on: cosine similarities, the words or the fact "
        "(subject, attribute, value) matched, the older values, the aliases."
    )
    created_at: datetime | None = strawberry.field(
        description="When it was applied; null in a dry run."
    )
    undone_at: datetime | None = strawberry.field(description="When it was undone, if it was.")

    @classmethod
    def from_domain(cls, action: consolidation.ConsolidationAction) -> ConsolidationAction:
        return cls(
            id=None if action.id is None else strawberry.ID(str(action.id)),
            kind=ConsolidationActionKind(action.kind.value),
            target_id=None if action.target_id is None else strawberry.ID(str(action.target_id)),
            ids=[strawberry.ID(str(i)) for i in action.ids],
            reason=action.reason,
            evidence=JSON(action.evidence),
            created_at=action.created_at,
            undone_at=action.undone_at,
        )


@strawberry.type(description="What a consolidation pass did, or would do in a dry run.")
class ConsolidationReport:
    actions: list[ConsolidationAction] = strawberry.field(description="Each action, in order.")
    dry_run: bool = strawberry.field(description="True: nothing was changed or journaled.")
    insights_examined: int = strawberry.field(description="Valid insights the pass compared.")
    entities_examined: int = strawberry.field(description="Automatic entities it compared.")
    sessions_examined: int = strawberry.field(
        description="Quiet sessions without an up-to-date digest."
    )

    @classmethod
    def from_domain(cls, report: consolidation.ConsolidationReport) -> ConsolidationReport:
        return cls(
            actions=[ConsolidationAction.from_domain(a) for a in report.actions],
            dry_run=report.dry_run,
            insights_examined=report.insights_examined,
            entities_examined=report.entities_examined,
            sessions_examined=report.sessions_examined,
        )


@strawberry.type(description="A row an undo left as it was.")
class LeftAsIs:
    id: strawberry.ID = strawberry.field(description="Its id.")
    why: str = strawberry.field(description="Why it was left.")


@strawberry.type(description="An undone consolidation action, and what it left as it was.")
class UndoConsolidationResult:
    action: ConsolidationAction = strawberry.field(description="The action, now undone.")
    restored: list[strawberry.ID] = strawberry.field(
        description="What stands again as before: the reopened insights, the entity nodes "
        "no longer aliases."
    )
    left: list[LeftAsIs] = strawberry.field(
        description="What the undo did not restore, and why (a caller closed it since, it "
        "was erased): undo reopens only what consolidation itself closed."
    )

    @classmethod
    def from_domain(cls, result: consolidation.UndoResult) -> UndoConsolidationResult:
        return cls(
            action=ConsolidationAction.from_domain(result.action),
            restored=[strawberry.ID(str(i)) for i in result.restored],
            left=[LeftAsIs(id=strawberry.ID(str(i)), why=why) for i, why in result.left.items()],
        )


@strawberry.type
class ConsolidationQueries:
    @strawberry.field(description="The consolidation journal, newest first.")
    async def consolidation_history(
        self,
        info: Info,
        first: Annotated[
            int | None, strawberry.argument(description="Page size (default 100, at most 1000).")
        ] = None,
        after: Annotated[
            str | None, strawberry.argument(description="Return actions after this cursor.")
        ] = None,
    ) -> Connection[ConsolidationAction]:
        page = await info.context.memory.consolidation.history(first=first, after=after)
        return to_connection(page, ConsolidationAction)


@strawberry.type
class ConsolidationMutations:
    @strawberry.mutation(
        description="Consolidate this namespace: merge duplicate insights, supersede changed "
        "facts, make near-duplicate automatic entities aliases, digest quiet sessions. Each "
        "action is journaled (consolidationHistory) and can be undone (undoConsolidation); a "
        "second run changes nothing. Raw dialogue, MCP observations and LangGraph items are "
        "never changed."
    )
    async def consolidate(
        self,
        info: Info,
        dry_run: Annotated[
            bool, strawberry.argument(description="Report what it would do; change nothing.")
        ] = False,
    ) -> ConsolidationReport:
        report = await info.context.memory.consolidation.run(dry_run=dry_run)
        return ConsolidationReport.from_domain(report)

    @strawberry.mutation(
        description="Undo one consolidation action: what stood before it stands again. "
        "Only what consolidation itself closed is reopened (a fact a caller closed stays "
        "closed, and the result says so); a later action on the same facts must be undone "
        "first."
    )
    async def undo_consolidation(
        self,
        info: Info,
        action_id: Annotated[strawberry.ID, strawberry.argument(description="Journal id.")],
    ) -> UndoConsolidationResult:
        result = await info.context.memory.consolidation.undo(action_id)
        return UndoConsolidationResult.from_domain(result)
