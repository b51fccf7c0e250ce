"""The LISTEN side of live events: one dedicated connection per server process.

Created in the app's lifespan. It LISTENs on the events channel, parses each notification
and hands it to the process's ``EventHub``. When the connection drops (database restart,
failover, a killed backend, a dead network link found by the periodic probe) it reconnects
with doubling, jittered backoff and then tells every subscriber to RESYNC, since whatever
was committed in between was never delivered to this process.
"""

from __future__ import annotations

import asyncio
import logging
import random
from contextlib import suppress
from typing import Any, Protocol

import asyncpg
from sqlalchemy.engine import make_url

from gql_memory.config import EVENTS_CHANNEL, LISTENER_APPLICATION_NAME, Settings
from gql_memory.live.hub import EventHub
from gql_memory.memory.events import MemoryEvent

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 5.0
PROBE_TIMEOUT_S = 5.0
CLOSE_TIMEOUT_S = 2.0


class ListenerObserver(Protocol):
    """What the listener reports (metrics implement it)."""

    def listener_connection_changed(self, connected: bool) -> None: ...

    def listener_reconnected(self) -> None: ...


def asyncpg_dsn(url: str) -> str:
    """The asyncpg DSN of a SQLAlchemy URL (``postgresql+asyncpg://`` -> ``postgresql://``)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class EventListener:
    """LISTENs for memory events and fans them out through the hub, reconnecting as needed."""

    def __init__(
        self,
        url: str,
        hub: EventHub,
        settings: Settings,
        observer: ListenerObserver | None = None,
        role: str | None = None,
    ) -> None:
        self._dsn = asyncpg_dsn(url)
        self._role = role
        self.hub = hub
        self.settings = settings
        self.observer = observer
        self._conn: Any = None
        self._lost = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Connect and LISTEN now (startup fails if the database is unreachable), then watch."""
        await self._connect()
        self._task = asyncio.create_task(self._supervise(), name="gql-memory event listener")

    async def stop(self) -> None:
        """Stop watching and close the connection."""
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._close()

    async def _connect(self) -> None:
        conn = await asyncpg.connect(
            self._dsn,
            timeout=CONNECT_TIMEOUT_S,
            server_settings={"application_name": LISTENER_APPLICATION_NAME}
            | ({"role": self._role} if self._role else {}),
        )
        lost = asyncio.Event()
        conn.add_termination_listener(lambda _conn: lost.set())
        try:
            await conn.add_listener(EVENTS_CHANNEL, self._on_notification)
        except BaseException:
            conn.terminate()
            raise
        self._conn, self._lost = conn, lost
        if self.observer:
            self.observer.listener_connection_changed(True)

    async def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None or conn.is_closed():
            return
        try:
            await asyncio.wait_for(conn.close(), CLOSE_TIMEOUT_S)
        except Exception:  # closing a broken connection can fail in many ways; drop it
            conn.terminate()

    def _on_notification(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        try:
            event = MemoryEvent.from_payload(payload)
        except ValueError as exc:
            log.warning("ignoring a notification on %s: %s", EVENTS_CHANNEL, exc)
            return
        try:
            self.hub.publish(event)
        except Exception:  # one bad subscriber must not stop delivery to the others
            log.exception("delivering a %s event failed", event.kind.value)

    async def _supervise(self) -> None:
        while True:
            await self._until_lost()
            log.warning("event listener: connection to PostgreSQL lost; reconnecting")
            if self.observer:
                self.observer.listener_connection_changed(False)
            await self._close()
            await self._reconnect()
            if self.observer:
                self.observer.listener_reconnected()
            log.info("event listener: reconnected; subscribers told to resync")
            self.hub.resync()

    async def _until_lost(self) -> None:
        """Return once the connection is gone (closed by the server, or failing a probe)."""
        while True:
            try:
                await asyncio.wait_for(self._lost.wait(), self.settings.listener_health_check_s)
                return
            except TimeoutError:
                pass
            try:
                await asyncio.wait_for(self._conn.execute("SELECT 1"), PROBE_TIMEOUT_S)
            except Exception as exc:  # any failure of the probe means: reconnect
                log.warning("event listener: probe failed: %r", exc)
                return

    async def _reconnect(self) -> None:
        delay = self.settings.listener_reconnect_min_s
        while True:
            try:
                await self._connect()
                return
            except Exception as exc:  # keep trying: the database may be restarting
                wait = delay * random.uniform(0.5, 1.0)  # jitter: replicas do not stampede
                log.warning("event listener: reconnect failed (%r); retrying in %.1fs", exc, wait)
                await asyncio.sleep(wait)
                delay = min(delay * 2, self.settings.listener_reconnect_max_s)
