"""Supervision of the embedded PostgreSQL this process started: restarted when it dies, its
state published for every worker's /readyz and /healthz.

One thread, in the process that started the server (``serve`` itself, also when uvicorn
runs its workers as other processes), looks every EMBEDDED_CHECK_INTERVAL_S at the
postmaster, at the new lines of the server's log and at the space left on its disk. When the
postmaster has died (killed, crashed, stopped by a full disk) the thread starts it again at
once, then with waits doubling up to GQL_MEMORY_EMBEDDED_RESTART_MAX_S, logging every
attempt and never the log's lines (they may quote a request). PostgreSQL's crash recovery
replays the WAL on each start, so every committed write, the only kind acknowledged, is there
afterwards. A full disk is named as such: from the log ("No space left on device"), or from a
data directory without space while the server cannot start.

The state goes to a small file (``StateFile``) that the workers read. It is overwritten in
place, so publishing needs no free space, even when the full disk is the one it lives on.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from tenacity import RetryCallState, Retrying, retry_if_exception_type, wait_exponential

from gql_memory.config import (
    EMBEDDED_CHECK_INTERVAL_S,
    EMBEDDED_DISK_FULL_BYTES,
    EMBEDDED_RESTART_FIRST_WAIT_S,
    EMBEDDED_START_TIMEOUT_S,
    Settings,
)
from gql_memory.db.embedded import EmbeddedPostgres, RestartFailed

log = logging.getLogger(__name__)

RUNNING = "running"
RESTARTING = "restarting"
FAILED = "failed"  # down for longer than embedded_give_up_s: liveness fails
DISK_FULL = "disk_full"
EXITED = "exited"

# How PostgreSQL reports a write refused for lack of space (ENOSPC, EDQUOT).
_DISK_FULL_LOGGED = re.compile(rb"No space left on device|Disk quota exceeded")
# Read at most this much of the log per check (a burst of errors must not stall the thread).
_LOG_READ_MAX = 1024 * 1024


@dataclass(frozen=True)
class EmbeddedState:
    """What the supervisor last found."""

    status: str = RUNNING  # running | restarting | failed
    reason: str | None = None  # disk_full | exited
    attempts: int = 0  # failed restarts since the server was last up
    restarts: int = 0  # successful restarts since the supervisor started

    @property
    def ready(self) -> bool:
        return self.status == RUNNING and self.reason is None

    @property
    def alive(self) -> bool:
        return self.status != FAILED

    def body(self) -> dict[str, Any]:
        """The part of a /readyz or /healthz body that says why the database is not there."""
        database = {RUNNING: "disk full", RESTARTING: "restarting", FAILED: "down"}[self.status]
        return {
            "database": database,
            "reason": self.reason,
            "restart_attempts": self.attempts,
            "restarts": self.restarts,
        }


class StateFile:
    """The supervisor's state as a fixed-size JSON file, written in place, read by workers."""

    SIZE = 512

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def create(cls) -> StateFile:
        """A new file in a private directory, in memory (/dev/shm) where there is one: the
        disk that fills up may well hold the temporary directory too."""
        shm = Path("/dev/shm")
        parent = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
        state_file = cls(Path(tempfile.mkdtemp(prefix="gql-memory-", dir=parent)) / "embedded")
        state_file.path.write_bytes(b" " * cls.SIZE)  # allocated once, overwritten from now on
        return state_file

    def write(self, state: EmbeddedState) -> None:
        data = json.dumps(asdict(state)).encode().ljust(self.SIZE)
        with self.path.open("r+b") as file:
            file.write(data)

    def read(self) -> EmbeddedState | None:
        """The last state written; None when there is none to read (removed, or caught
        mid-write: the next read has it)."""
        try:
            return EmbeddedState(**json.loads(self.path.read_bytes()))
        except (OSError, ValueError, TypeError):
            return None

    def remove(self) -> None:
        shutil.rmtree(self.path.parent, ignore_errors=True)


class _Stopping(Exception):
    """The supervisor is being stopped: no more restarts."""


class Supervisor:
    """Watches one embedded server from a thread; ``start``, then ``stop`` before the server
    itself is stopped (else the stop would look like a death)."""

    def __init__(self, embedded: EmbeddedPostgres, settings: Settings) -> None:
        self.embedded = embedded
        self.restart_max_s = settings.embedded_restart_max_s
        self.give_up_s = settings.embedded_give_up_s
        self.state_file = StateFile.create()
        self.state = EmbeddedState()
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="gql-memory embedded PostgreSQL supervisor", daemon=True
        )
        self._log_offset = self._log_size()
        self._free_when_full: int | None = None  # free bytes when the disk was found full
        self._down_since = 0.0

    def start(self) -> None:
        self.state_file.write(self.state)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join()
        self.state_file.remove()

    def _run(self) -> None:
        while not self._stopping.wait(EMBEDDED_CHECK_INTERVAL_S):
            try:
                self.check()
            except _Stopping:
                return
            except Exception:  # the supervision must outlive any one failed check
                log.exception("supervising the embedded PostgreSQL failed; going on")

    def check(self) -> None:
        """One look: a live server's disk, or a dead server's restart (until it is back)."""
        self._watch_disk()
        if self.embedded.running():
            self._publish(status=RUNNING, reason=self._reason(None), attempts=0)
            return
        self._down_since = time.monotonic()
        pid = self.embedded.server.get_postmaster_info().pid
        reason = self._reason(EXITED)
        log.error(
            "embedded PostgreSQL (pid %s) exited%s; restarting it",
            pid,
            ": the disk is full (No space left on device)" if reason == DISK_FULL else "",
        )
        self._publish(status=RESTARTING, reason=reason, attempts=0)
        retrying = Retrying(
            retry=retry_if_exception_type(RestartFailed),
            wait=wait_exponential(multiplier=EMBEDDED_RESTART_FIRST_WAIT_S, max=self.restart_max_s),
            sleep=self._sleep,
            before_sleep=self._restart_failed,
            reraise=True,
        )
        retrying(self.embedded.restart, EMBEDDED_START_TIMEOUT_S)
        self._watch_disk()
        log.warning(
            "embedded PostgreSQL is running again (pid %s) after %d failed restart attempts; "
            "crash recovery replayed its WAL",
            self.embedded.server.get_postmaster_info().pid,
            self.state.attempts,
        )
        self._publish(
            status=RUNNING, reason=self._reason(None), attempts=0, restarts=self.state.restarts + 1
        )

    def _restart_failed(self, retry: RetryCallState) -> None:
        self._watch_disk()
        reason = self._reason(EXITED)
        wait = retry.next_action.sleep if retry.next_action else 0.0
        error = retry.outcome.exception() if retry.outcome else None
        log.warning(
            "embedded PostgreSQL restart attempt %d failed (%s%s); next attempt in %.1f s",
            retry.attempt_number,
            error,
            "; the disk is full: No space left on device" if reason == DISK_FULL else "",
            wait,
        )
        status = FAILED if self.state.status == FAILED else RESTARTING
        self._publish(status=status, reason=reason, attempts=retry.attempt_number)

    def _sleep(self, seconds: float) -> None:
        """Wait between attempts; past embedded_give_up_s, say that it is not coming back."""
        until = time.monotonic() + seconds
        while (left := until - time.monotonic()) > 0:
            give_up_in = self._down_since + self.give_up_s - time.monotonic()
            if self.state.status != FAILED and give_up_in <= 0:
                log.error(
                    "embedded PostgreSQL has been down for %.0f s (%s); /healthz now fails, "
                    "restarts go on",
                    self.give_up_s,
                    "the disk is full" if self.state.reason == DISK_FULL else "it does not start",
                )
                self._publish(status=FAILED)
                continue
            step = left if self.state.status == FAILED else min(left, max(give_up_in, 0.01))
            if self._stopping.wait(step):
                raise _Stopping

    # --- the disk ---------------------------------------------------------------------------

    def _watch_disk(self) -> None:
        """Find a full disk (the log says a write was refused, or next to no space is left:
        the log itself may not be writable then), and find it freed (see
        EMBEDDED_DISK_FULL_BYTES)."""
        free = self._free_bytes()
        if free is None:
            return
        full = self._log_says_disk_full() or free < EMBEDDED_DISK_FULL_BYTES
        if full:
            if self._free_when_full is None:
                log.error(
                    "embedded PostgreSQL: the disk is full (No space left on device) in %s, "
                    "%d bytes free; writes fail until space is freed",
                    self.embedded.pgdata,
                    free,
                )
            self._free_when_full = free
        elif (
            self._free_when_full is not None
            and free >= self._free_when_full + EMBEDDED_DISK_FULL_BYTES
        ):
            log.warning("embedded PostgreSQL: disk space freed (%d bytes free)", free)
            self._free_when_full = None

    def _reason(self, otherwise: str | None) -> str | None:
        return DISK_FULL if self._free_when_full is not None else otherwise

    def _free_bytes(self) -> int | None:
        try:
            stat = os.statvfs(self.embedded.pgdata)
        except OSError:
            return None
        return stat.f_bavail * stat.f_frsize  # what an unprivileged user (the server) may use

    def _log_size(self) -> int:
        try:
            return self.embedded.log_path.stat().st_size
        except OSError:
            return 0

    def _log_says_disk_full(self) -> bool:
        """Whether the server logged a refused write since the last look."""
        size = self._log_size()
        if size < self._log_offset:  # truncated or replaced: read it from the start
            self._log_offset = 0
        start = max(self._log_offset, size - _LOG_READ_MAX)
        try:
            with self.embedded.log_path.open("rb") as file:
                file.seek(start)
                new = file.read(size - start)
        except OSError:
            return False
        self._log_offset = start + len(new)
        return _DISK_FULL_LOGGED.search(new) is not None

    def _publish(self, **changes: Any) -> None:
        state = replace(self.state, **changes)
        if state != self.state:
            self.state = state
            self.state_file.write(state)
