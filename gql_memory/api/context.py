"""Per-request context handed to every resolver."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from strawberry.types import Info as StrawberryInfo

from gql_memory.api.auth import Credentials
from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.memory import Memory


@dataclass
class Context:
    """The caller's credentials, namespace-bound services and request metadata."""

    request: Any
    response: Any
    db: Database
    settings: Settings
    request_id: str
    credentials: Credentials
    connection_params: dict[str, Any] | None = None  # set by strawberry on websockets
    _memory: Memory | None = field(default=None, repr=False)

    @property
    def memory(self) -> Memory:
        """Every layer, confined to the caller's namespace (from the API key, never the request).

        Without an authenticated principal this raises, so even a resolver that somehow ran
        before the ScopeGuard could not touch any namespace.
        """
        principal = self.credentials.require()
        if self._memory is None or self._memory.namespace != principal.namespace:
            self._memory = Memory(self.db, self.settings, principal.namespace)
        return self._memory


Info = StrawberryInfo[Context, None]
