"""GraphQL subscriptions: live memory events over graphql-transport-ws (WebSocket), graphql-sse
(Server-Sent Events) and Apollo's multipart HTTP subscriptions.

Events come from PostgreSQL LISTEN/NOTIFY through the process's EventHub, so a subscriber on
any worker or replica sees every committed write. A subscriber only ever sees its own
namespace: the namespace is taken from the per-request context (``caller_namespace``) and
the hub never hands it another namespace's events. Subscriptions read, never write.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Annotated

import strawberry
from starlette.websockets import WebSocket

from gql_memory.api.info import Info
from gql_memory.api.working import WorkingMemoryItem
from gql_memory.api.working_enums import ArchiveReason
from gql_memory.errors import ServiceUnavailableError, UnauthenticatedError, ValidationError
from gql_memory.live.hub import EventHub, Subscriber, SubscriptionRevoked
from gql_memory.memory import events
from gql_memory.memory.events import WORKING_MEMORY_KINDS, EventKind
from gql_memory.memory.validation import require_session_id
from gql_memory.memory.working.archive import ArchiveReason as DomainArchiveReason

MemoryEventKind = EventKind  # registered with strawberry below
strawberry.enum(
    EventKind,
    name="MemoryEventKind",
    description="What happened. RESYNC is sent by the server after its event stream was "
    "interrupted (database connection lost and back): refetch, events may have been missed.",
)


@strawberry.type(
    description="A change in your namespace. Carries kinds and ids, not content: fetch what "
    "you need with the queries (e.g. workingMemoryItem(id))."
)
class MemoryEvent:
    kind: MemoryEventKind = strawberry.field(description="What happened.")
    session_id: str | None = strawberry.field(
        description="Session of a working-memory or dialogue event; null for the others."
    )
    ids: list[strawberry.ID] = strawberry.field(
        description="Ids of the memories concerned: working-memory ids for working-memory "
        "kinds, raw dialogue / insight / episode ids for the others. A bulk write may arrive "
        "as several events."
    )
    item_id: strawberry.ID | None = strawberry.field(
        description="The first of `ids` (most events concern exactly one memory)."
    )
    archived_ids: list[strawberry.ID] = strawberry.field(
        description="Stale-memory ids, parallel to `ids`: where EVICTED / ARCHIVED / DECAYED "
        "items went, or (RESTORED) the stale row the item came back from."
    )
    reason: ArchiveReason | None = strawberry.field(
        description="Archive reason of EVICTED (LRU_EVICTION), DECAYED (DECAY_EVICTION) and "
        "ARCHIVED (MANUAL_ARCHIVE) events."
    )
    occurred_at: datetime = strawberry.field(
        description="When the write happened (server clock, inside its transaction)."
    )

    @classmethod
    def from_domain(cls, event: events.MemoryEvent) -> MemoryEvent:
        reason = event.archive_reason
        return cls(
            kind=event.kind,
            session_id=event.session_id,
            ids=[strawberry.ID(str(i)) for i in event.ids],
            item_id=strawberry.ID(str(event.ids[0])) if event.ids else None,
            archived_ids=[strawberry.ID(str(i)) for i in event.archived_ids],
            reason=DomainArchiveReason(reason) if reason else None,
            occurred_at=event.occurred_at,
        )


@strawberry.type(description="A change of one session's working memory.")
class WorkingMemoryChange:
    event: MemoryEvent = strawberry.field(description="What changed.")
    session_id: strawberry.Private[str]

    @strawberry.field(
        description="The session's working memory as it is when the event is delivered (so "
        "after the change), most recently accessed first. Read (read-only) only when selected."
    )
    async def items(self, info: Info) -> list[WorkingMemoryItem]:
        found = await info.context.memory.working.list(self.session_id)
        return [WorkingMemoryItem.from_domain(i) for i in found]


def caller_namespace(info: Info) -> str:
    """The namespace a subscriber may see: the one its request context is bound to."""
    return info.context.memory.namespace


def _hub(info: Info) -> EventHub:
    hub = info.context.events
    if hub is None:
        raise ServiceUnavailableError(
            "Live events are switched off on this server (GQL_MEMORY_LIVE_EVENTS=false)."
        )
    return hub


def caller_key(info: Info) -> int | None:
    principal = info.context.credentials.principal
    return principal.key_id if principal is not None else None


async def delivered(info: Info, subscriber: Subscriber) -> AsyncIterator[events.MemoryEvent]:
    """The subscriber's events while its API key stays valid.

    A revocation arrives as KEY_REVOKED through the hub and ends the stream before any later
    write. As a fallback (a LISTEN outage), the key is also re-checked whenever the stream
    has been idle for the key cache's TTL. Either way a WebSocket is closed with 4403 and an
    HTTP stream ends with UNAUTHENTICATED.
    """
    context = info.context
    interval = context.settings.api_key_cache_ttl_s
    refresh = context.refresh_credentials
    events_iter = subscriber.__aiter__()
    while True:
        try:
            if refresh is None or context.credentials.principal is None:
                event = await events_iter.__anext__()
            else:
                event = await asyncio.wait_for(events_iter.__anext__(), timeout=interval)
        except StopAsyncIteration:
            return
        except TimeoutError:
            assert refresh is not None  # only a stream that refreshes waits with a timeout
            context.credentials = await refresh(context.credentials)
            if context.credentials.principal is None:
                await _close_revoked(info)
                return
            continue
        except SubscriptionRevoked:
            await _close_revoked(info)
            return
        yield event


async def _close_revoked(info: Info) -> None:
    request = info.context.request
    if isinstance(request, WebSocket):  # an HTTP stream ends with this error as its last event
        with contextlib.suppress(RuntimeError):  # already closing
            await request.close(code=4403, reason="API key revoked")
    raise UnauthenticatedError("The API key of this subscription was revoked")


@contextmanager
def subscription_slot(info: Info) -> Iterator[None]:
    """Holds one of the connection's and one of the API key's subscription slots while the
    stream is open: a client cannot make every write fan out to thousands of its streams."""
    context = info.context
    settings = context.settings
    if context.open_subscriptions >= settings.max_subscriptions_per_connection:
        raise ValidationError(
            f"At most {settings.max_subscriptions_per_connection} subscriptions per connection "
            "(GQL_MEMORY_MAX_SUBSCRIPTIONS_PER_CONNECTION): complete one first"
        )
    principal = context.credentials.principal
    key = f"key:{principal.key_id}" if principal and principal.key_id else "anonymous"
    with _hub(info).slot(key, settings.max_subscriptions_per_key):
        context.open_subscriptions += 1
        try:
            yield
        finally:
            context.open_subscriptions -= 1


@strawberry.type(
    description="Live streams of memory events (graphql-transport-ws, graphql-sse, multipart)."
)
class MemorySubscriptions:
    @strawberry.subscription(
        description="Changes of one session's working memory: added, evicted, archived, "
        "decayed, restored, accessed, cleared, forgotten (and RESYNC)."
    )
    async def working_memory_changed(
        self,
        info: Info,
        session_id: Annotated[
            str, strawberry.argument(description='Session to watch (default "default").')
        ] = "default",
    ) -> AsyncGenerator[WorkingMemoryChange, None]:
        session_id = require_session_id(session_id)

        def wants(event: events.MemoryEvent) -> bool:
            return event.kind is EventKind.RESYNC or (
                event.kind in WORKING_MEMORY_KINDS and event.session_id == session_id
            )

        stream = "workingMemoryChanged"
        with (
            subscription_slot(info),
            _hub(info).subscribe(
                caller_namespace(info), wants, stream, caller_key(info)
            ) as subscriber,
        ):
            async for event in delivered(info, subscriber):
                yield WorkingMemoryChange(
                    event=MemoryEvent.from_domain(event), session_id=session_id
                )

    @strawberry.subscription(
        description="Every change in your namespace: working memory, dialogue, insights, "
        "episodes (and RESYNC)."
    )
    async def memory_events(
        self,
        info: Info,
        kinds: Annotated[
            list[MemoryEventKind] | None,
            strawberry.argument(description="Only these kinds (default: all; RESYNC always)."),
        ] = None,
    ) -> AsyncGenerator[MemoryEvent, None]:
        wanted = frozenset(kinds) if kinds else None

        def wants(event: events.MemoryEvent) -> bool:
            return wanted is None or event.kind in wanted or event.kind is EventKind.RESYNC

        with (
            subscription_slot(info),
            _hub(info).subscribe(
                caller_namespace(info), wants, "memoryEvents", caller_key(info)
            ) as subscriber,
        ):
            async for event in delivered(info, subscriber):
                yield MemoryEvent.from_domain(event)
