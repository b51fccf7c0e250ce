"""The health of the primary and of every read replica, checked on connections of their own.

One task per process asks, each GQL_MEMORY_REPLICA_CHECK_INTERVAL_S, the primary for the WAL
position it has flushed and every replica for the position it has replayed and whether it is
still a standby. A replica's lag is how long ago the primary had written what the replica has
not replayed yet; while the primary is down, the replica's own estimate stands in.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, Protocol

import asyncpg
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from gql_memory.config import Settings
from gql_memory.db.positions import parse_lsn

log = logging.getLogger(__name__)

# The primary's position for measuring lag: what it has flushed (and can stream), so that an
# idle primary and a caught-up replica compare equal.
PRIMARY_POSITION_SQL = "SELECT pg_current_wal_flush_lsn()::text"
# A standby's own view of its lag, used while the primary cannot be asked: nothing to replay
# means no lag, else the age of the last replayed commit.
REPLICA_CHECK_SQL = """
SELECT pg_is_in_recovery(),
       pg_last_wal_replay_lsn()::text,
       CASE WHEN pg_last_wal_receive_lsn() IS NOT DISTINCT FROM pg_last_wal_replay_lsn() THEN 0
            ELSE coalesce(extract(epoch FROM now() - pg_last_xact_replay_timestamp()), 0)
       END::float8
"""
# application_name of the checks' connections (one per server and process)
CHECKS_APPLICATION_NAME = "gql-memory-checks"


class HealthObserver(Protocol):
    """What the checks report (metrics implement it)."""

    def server_checked(self, server: str, up: bool, lag_s: float | None) -> None: ...


class Probe:
    """One connection of the checks' own to one server: a pool busy with requests never makes
    a server look down (a false "primary down" would refuse every write)."""

    def __init__(self, engine: AsyncEngine, timeout_s: float) -> None:
        # the engine's URL as asyncpg takes it (postgresql+asyncpg:// -> postgresql://)
        self._dsn = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        self.timeout_s = timeout_s
        self._conn: asyncpg.Connection | None = None

    async def fetchrow(self, sql: str) -> Any:
        """One statement, (re)connecting first if needed, all within the timeout."""
        async with asyncio.timeout(self.timeout_s):
            if self._conn is None or self._conn.is_closed():
                self._conn = await asyncpg.connect(
                    self._dsn, server_settings={"application_name": CHECKS_APPLICATION_NAME}
                )
            try:
                return await self._conn.fetchrow(sql)
            except BaseException:
                self._conn.terminate()  # failed or cut short: never reused
                self._conn = None
                raise

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.terminate()


@dataclass(eq=False)
class Replica:
    """One standby and what the last check (or read) learnt about it."""

    name: str
    engine: AsyncEngine
    probe: Probe
    up: bool = False
    replay_lsn: int = 0
    lag_s: float = math.inf


def server_name(url: str) -> str:
    """host:port/database of a URL, without user or password (a metric label, a log line)."""
    parsed = make_url(url)
    host = parsed.host or parsed.query.get("host") or "localhost"
    if isinstance(host, tuple):
        host = host[0]
    return f"{host}:{parsed.port or parsed.query.get('port') or 5432}/{parsed.database}"


class Health:
    """What the last checks found: is the primary up, which replicas are up, how far behind."""

    def __init__(
        self,
        primary: AsyncEngine,
        replicas: list[Replica],
        settings: Settings,
        observer: HealthObserver | None = None,
    ) -> None:
        self.replicas = replicas
        self.max_lag_s = settings.replica_max_lag_s
        self.interval_s = settings.replica_check_interval_s
        self.observer = observer
        self.primary_up = True  # until a check finds otherwise
        self._primary_probe = Probe(primary, settings.db_connect_timeout_s)
        # (when, primary position) of recent checks: a replica's lag is the age of the oldest
        # position it has not replayed yet; kept long enough to see lags past the bound.
        self._positions: deque[tuple[float, int]] = deque(
            maxlen=min(10_000, math.ceil(self.max_lag_s / self.interval_s) + 2)
        )
        self._checking = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Check every server once (routing starts informed), then keep checking."""
        await self.check()
        self._task = asyncio.create_task(self._watch(), name="gql-memory replica checks")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._primary_probe.close()
        for replica in self.replicas:
            await replica.probe.close()

    def usable(self) -> tuple[list[Replica], str]:
        """(replicas that may serve reads now, why none may)."""
        up = [r for r in self.replicas if r.up]
        if not up:
            return [], "unavailable"
        if not self.primary_up:
            return up, ""  # stale answers beat no answers while the primary is down
        fresh = [r for r in up if r.lag_s <= self.max_lag_s]
        return fresh, "" if fresh else "lagging"

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.check()
            except Exception:  # a check must never stop the checking
                log.exception("checking the database servers failed")

    async def check(self) -> None:
        """Ask the primary for its position, then every replica for its replay position."""
        async with self._checking:
            asked_at = time.monotonic()
            position = await self._primary_position()
            self._primary_checked(position is not None)
            if position is not None:
                self._positions.append((asked_at, position))
            await asyncio.gather(*(self._check_replica(r) for r in self.replicas))

    async def _primary_position(self) -> int | None:
        try:
            row = await self._primary_probe.fetchrow(PRIMARY_POSITION_SQL)
        except Exception as exc:  # any failure: not usable for writes now
            log.debug("primary check failed: %r", exc)
            return None
        return parse_lsn(row[0])

    def _primary_checked(self, up: bool) -> None:
        if up != self.primary_up:
            if up:
                log.warning("the primary database is back: writes are accepted again")
            else:
                log.warning(
                    "the primary database is unreachable: reads go to the replicas, "
                    "writes fail with SERVICE_UNAVAILABLE until it is back"
                )
        self.primary_up = up
        if self.observer:
            self.observer.server_checked("primary", up, None)

    async def _check_replica(self, replica: Replica) -> None:
        try:
            row = await replica.probe.fetchrow(REPLICA_CHECK_SQL)
        except Exception as exc:  # down, unreachable, or refusing connections
            self.replica_checked(replica, False, f"unreachable ({exc!r})")
            return
        in_recovery, replayed, own_lag_s = row
        if not in_recovery or replayed is None:
            # promoted, or a primary listed by mistake: its data may have diverged
            self.replica_checked(replica, False, "not a standby (pg_is_in_recovery() is false)")
            return
        replay_lsn = parse_lsn(replayed)
        replica.replay_lsn = max(replica.replay_lsn, replay_lsn)
        replica.lag_s = self._lag_s(replay_lsn, own_lag_s)
        self.replica_checked(replica, True, None)

    def _lag_s(self, replay_lsn: int, own_lag_s: float) -> float:
        """How long ago the primary had written what the replica has not replayed yet."""
        if not self.primary_up or not self._positions:
            return max(0.0, own_lag_s)
        if replay_lsn >= self._positions[-1][1]:
            return 0.0
        now = time.monotonic()
        for asked_at, position in self._positions:
            if position > replay_lsn:
                return now - asked_at
        return 0.0  # unreachable: the newest position is past replay_lsn

    def replica_checked(self, replica: Replica, up: bool, why: str | None) -> None:
        """Record what a check, or a read that could not connect, found about a replica."""
        if up != replica.up:
            if up:
                log.info("replica %s is serving reads", replica.name)
            else:
                log.warning("replica %s skipped: %s", replica.name, why)
        replica.up = up
        if self.observer:
            self.observer.server_checked(replica.name, up, replica.lag_s if up else None)
