"""GraphQL for raw dialogue (L0): verbatim turns, stored and listed."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import strawberry
from strawberry.scalars import JSON

from gql_memory.api.info import Info
from gql_memory.api.json_values import json_object
from gql_memory.api.pagination import AfterArg, Connection, FirstArg, to_connection
from gql_memory.memory import raw

SessionFilterArg = Annotated[
    str | None,
    strawberry.argument(description='Only this session (default "default"); null: every session.'),
]


@strawberry.type(description="One verbatim dialogue turn (L0 raw memory).")
class RawDialogue:
    id: strawberry.ID = strawberry.field(description="Database id of the turn.")
    session_id: str = strawberry.field(description="Conversation the turn belongs to.")
    speaker: str = strawberry.field(description='Who spoke: "user", "assistant" or custom.')
    content: str = strawberry.field(description="What was said, verbatim.")
    metadata: JSON | None = strawberry.field(description="Caller-supplied JSON object.")
    timestamp: datetime = strawberry.field(description="When the turn happened (UTC).")

    @classmethod
    def from_domain(cls, turn: raw.RawDialogue) -> RawDialogue:
        return cls(
            id=strawberry.ID(str(turn.id)),
            session_id=turn.session_id,
            speaker=turn.speaker,
            content=turn.content,
            metadata=JSON(turn.metadata),
            timestamp=turn.timestamp,
        )


@strawberry.input(description="A dialogue turn to store.")
class RawDialogueInput:
    session_id: str = strawberry.field(description="Conversation id (required, non-empty).")
    speaker: str = strawberry.field(description='Who spoke: "user", "assistant" or custom.')
    content: str = strawberry.field(description="What was said; stored verbatim, no size limit.")
    metadata: JSON | None = strawberry.field(
        default=None, description="Optional JSON object stored with the turn."
    )
    timestamp: datetime | None = strawberry.field(
        default=None, description="When the turn happened (default: now); for imports."
    )

    def to_domain(self) -> raw.RawDialogueInput:
        return raw.RawDialogueInput(
            session_id=self.session_id,
            speaker=self.speaker,
            content=self.content,
            metadata=json_object(self.metadata),
            timestamp=self.timestamp,
        )


TurnArg = Annotated[RawDialogueInput, strawberry.argument(description="The turn to store.")]
TurnsArg = Annotated[
    list[RawDialogueInput], strawberry.argument(description="The turns, in order (1..10000).")
]


@strawberry.type(description="Queries of the raw dialogue layer.")
class RawQueries:
    @strawberry.field(description="Raw dialogue turns, newest first, optionally filtered.")
    async def raw_dialogue(
        self,
        info: Info,
        session_id: SessionFilterArg = "default",
        from_: Annotated[
            datetime | None,
            strawberry.argument(name="from", description="Only turns at or after this time."),
        ] = None,
        to: Annotated[
            datetime | None, strawberry.argument(description="Only turns at or before this time.")
        ] = None,
        date_range: Annotated[
            str | None,
            strawberry.argument(
                description='Whole UTC days "YYYY-MM-DD:YYYY-MM-DD" (instead of from/to).'
            ),
        ] = None,
        speaker: Annotated[
            str | None, strawberry.argument(description="Only turns of this speaker.")
        ] = None,
        first: FirstArg = None,
        after: AfterArg = None,
    ) -> Connection[RawDialogue]:
        page = await info.context.memory.raw.list(
            session_id=session_id,
            from_=from_,
            to=to,
            date_range=date_range,
            speaker=speaker,
            first=first,
            after=after,
        )
        return to_connection(page, RawDialogue)


@strawberry.type(description="Mutations of the raw dialogue layer.")
class RawMutations:
    @strawberry.mutation(description="Store one dialogue turn verbatim.")
    async def store_raw_dialogue(self, info: Info, input: TurnArg) -> RawDialogue:
        turn = input.to_domain()
        stored = await info.context.memory.raw.store(
            turn.session_id, turn.speaker, turn.content, turn.metadata, turn.timestamp
        )
        return RawDialogue.from_domain(stored)

    @strawberry.mutation(description="Store many turns in one transaction (all or none).")
    async def store_raw_dialogue_batch(self, info: Info, input: TurnsArg) -> list[RawDialogue]:
        stored = await info.context.memory.raw.store_many([t.to_domain() for t in input])
        return [RawDialogue.from_domain(t) for t in stored]
