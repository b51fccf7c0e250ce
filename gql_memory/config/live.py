"""Live events (SPEC §4 subscriptions, §6 scale-out): the NOTIFY channel every write
publishes on, subscriptions' buffers and limits, and the LISTEN connection's retries."""

from __future__ import annotations

from pydantic import Field

# Every committed write publishes small events with NOTIFY on this one channel; the namespace
# travels in the payload (see gql_memory.memory.events for why one channel, not one per tenant).
EVENTS_CHANNEL = "gql_memory_events"
# PostgreSQL refuses NOTIFY payloads of 8000 bytes or more; bigger events are split by ids.
NOTIFY_PAYLOAD_MAX_BYTES = 7900
# application_name of the listener's connection (it shows up in pg_stat_activity).
LISTENER_APPLICATION_NAME = "gql-memory-listener"
# Engine execution option that carries Settings.live_events to the write paths' publish().
LIVE_EVENTS_OPTION = "gql_memory_live_events"


class LiveEventsSettings:
    """Settings of live events and subscriptions (part of ``Settings``)."""

    live_events: bool = Field(
        default=True,
        description="Publish memory events (NOTIFY) on every write and serve subscriptions. "
        "Off: writes skip NOTIFY (PostgreSQL serializes the commits of notifying "
        "transactions) and subscriptions answer SERVICE_UNAVAILABLE.",
    )
    subscriber_queue_size: int = Field(
        default=1000,
        ge=1,
        le=1_000_000,
        description="Events buffered per subscription; a subscriber that falls this far behind "
        "is closed with SERVICE_UNAVAILABLE (it resubscribes and refetches) so that it never "
        "holds up anyone else.",
    )
    max_subscriptions_per_connection: int = Field(
        default=20,
        ge=1,
        le=10_000,
        description="Open subscriptions one WebSocket connection may hold.",
    )
    max_subscriptions_per_key: int = Field(
        default=100,
        ge=1,
        le=100_000,
        description="Open subscriptions one API key (or all anonymous callers) may hold per "
        "server process.",
    )
    listener_reconnect_min_s: float = Field(
        default=0.5, gt=0.0, le=60.0, description="First retry delay of the LISTEN connection."
    )
    listener_reconnect_max_s: float = Field(
        default=10.0, gt=0.0, le=600.0, description="Longest retry delay (doubling backoff)."
    )
    listener_health_check_s: float = Field(
        default=15.0,
        gt=0.0,
        le=3600.0,
        description="How often an idle LISTEN connection is probed (finds silently dead links).",
    )
