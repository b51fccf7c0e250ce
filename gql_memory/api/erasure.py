"""GraphQL for erasure on request: `forgetSession` (gql_memory.memory.erasure)."""

from __future__ import annotations

from typing import Annotated

import strawberry

from gql_memory.api.info import Info

SessionArg = Annotated[str, strawberry.argument(description='Session id (default "default").')]


@strawberry.type(description="Mutations that erase what a session stored.")
class ErasureMutations:
    @strawberry.mutation(
        description="Erase everything stored for a session (working, stale, raw dialogue); "
        "returns the number of rows deleted."
    )
    async def forget_session(self, info: Info, session_id: SessionArg = "default") -> int:
        return await info.context.memory.forget_session(session_id)
