"""Per-request context handed to every resolver."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from strawberry.types import Info as StrawberryInfo

from gql_memory.api.loaders import Loaders
from gql_memory.config import Settings
from gql_memory.event_hub import EventHub
from gql_memory.memory import Memory


@dataclass
class Context:
    """The caller's namespace-bound services plus request metadata."""

    request: Any
    response: Any
    memory: Memory
    settings: Settings
    request_id: str
    loaders: Loaders
    events: EventHub | None = None  # live events of this process (subscriptions)


Info = StrawberryInfo[Context, None]
