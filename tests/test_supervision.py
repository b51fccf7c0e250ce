"""The embedded PostgreSQL that `serve` started is supervised: restarted when it dies, a full
disk named on /readyz, and back by itself once space is freed, with no acknowledged write lost.

Real `gql-memory serve` processes, each with its own data directory. Outcomes are asserted
(writes served again, every acknowledged write present, the reason on /readyz); how long a
recovery took is only printed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from gql_memory.db import Database
from tests.processes import (
    ServeProcess,
    embedded_url,
    graphql,
    postmaster_pid,
    process_alive,
    stop_embedded_leftovers,
    wait_until,
)
from tests.test_reliability import STORE, WriteLoad, assert_acknowledged_writes_survived

# Bounds that only turn a hang into a failure: a restart takes about a second.
BACK_WITHIN_S = 45
TMPFS_SIZE = "96m"  # the migrated data directory takes about 45 MB of it


async def until(serve: ServeProcess, condition: Callable[[], Awaitable[bool]]) -> None:
    """Poll ``condition`` (up to BACK_WITHIN_S); a failure shows the server's log."""
    try:
        await wait_until(condition, BACK_WITHIN_S, interval=0.1)
    except TimeoutError:
        name = getattr(condition, "__name__", "the condition")
        raise AssertionError(f"{name}: still false; serve's log:\n{serve.log()[-4000:]}") from None


async def test_kill_9_of_the_postmaster_under_load_is_repaired_losing_nothing(
    scratch_dir: Path,
) -> None:
    data_dir = scratch_dir / "data"
    serve = ServeProcess(data_dir, workers=2).start()  # the parent supervises, workers serve
    try:
        load = WriteLoad(serve.base_url)
        running = load.start()
        await load.until_acknowledged(200)
        killed = postmaster_pid(data_dir)
        assert killed is not None
        os.kill(killed, signal.SIGKILL)  # the postmaster alone, as the OOM killer would
        acked_at_kill = len(load.acked_turns) + sum(load.acked_adds.values())
        killed_at = time.monotonic()

        async def writes_served_again() -> bool:
            return len(load.acked_turns) + sum(load.acked_adds.values()) >= acked_at_kill + 200

        await until(serve, writes_served_again)
        print(f"writes acknowledged again {time.monotonic() - killed_at:.1f} s after the kill")
        print(*(line for line in serve.log().splitlines() if "supervision" in line), sep="\n")
        load.stop.set()
        await running

        assert not process_alive(killed)
        assert postmaster_pid(data_dir) != killed
        assert "restarting it" in serve.log() and "running again" in serve.log()
        async with httpx.AsyncClient(base_url=serve.base_url, timeout=10) as client:

            async def ready() -> bool:  # the supervisor publishes "running" after the start
                return (await client.get("/readyz")).json()["status"] == "ok"

            await until(serve, ready)
            assert (await client.get("/healthz")).status_code == 200
        await assert_acknowledged_writes_survived(data_dir, [load])
        acked = len(load.acked_turns) + sum(load.acked_adds.values())
        print(f"{acked} writes acknowledged, all present ({acked_at_kill} before the kill)")
    finally:
        serve.stop()
        stop_embedded_leftovers(data_dir)
    assert postmaster_pid(data_dir) is None, "the restarted database was not stopped cleanly"


@contextlib.contextmanager
def small_tmpfs(mount_point: Path) -> Iterator[Path]:
    """A tmpfs of TMPFS_SIZE at ``mount_point`` (root only), unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill up needs root")
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        if subprocess.run(["umount", str(mount_point)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill(path: Path) -> int:
    """Write ``path`` until the disk is full; the bytes written."""
    written = 0
    with path.open("wb", buffering=0) as file:
        for chunk in (1 << 20, 1 << 12):  # megabytes, then the last pages
            while True:
                try:
                    written += file.write(b"\0" * chunk)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC, exc
                    break
    return written


async def store(client: httpx.AsyncClient, content: str) -> bool:
    """Whether storing a turn was acknowledged."""
    try:
        body = await graphql(client, STORE, {"s": "disk", "c": content})
    except (httpx.HTTPError, ValueError):
        return False
    return bool(body.get("data")) and not body.get("errors")


async def test_a_full_disk_is_named_and_the_service_comes_back_once_space_is_freed(
    scratch_dir: Path,
) -> None:
    with small_tmpfs(scratch_dir / "data") as data_dir:
        serve = ServeProcess(data_dir).start()  # its log is outside the tmpfs
        filler = data_dir / "filler"  # beside pgdata, on the same small disk
        acked: list[str] = []
        try:
            async with httpx.AsyncClient(base_url=serve.base_url, timeout=30) as client:
                for n in range(20):
                    assert await store(client, f"before-{n}")
                    acked.append(f"before-{n}")
                print(f"filled the disk with {fill(filler) >> 20} MB")

                refused = 0
                for n in range(2000):  # until PostgreSQL fails for lack of space
                    content = f"full-{n} " + "x" * 4000
                    if not await store(client, content):
                        refused += 1
                        break
                    acked.append(content)
                assert refused, "every write succeeded on a full disk"

                async def disk_full_named() -> bool:
                    ready = await client.get("/readyz")
                    return ready.status_code == 503 and ready.json()["reason"] == "disk_full"

                await until(serve, disk_full_named)
                print("/readyz:", (await client.get("/readyz")).json())
                assert "the disk is full (No space left on device)" in serve.log()

                filler.unlink()  # the operator frees space; nobody restarts anything
                freed_at = time.monotonic()

                async def writes_succeed() -> bool:
                    return await store(client, "after-freeing")

                await until(serve, writes_succeed)
                acked.append("after-freeing")

                async def ready() -> bool:
                    return (await client.get("/readyz")).status_code == 200

                await until(serve, ready)
                print(f"served and ready {time.monotonic() - freed_at:.1f} s after freeing")
                assert (await client.get("/healthz")).status_code == 200
            assert serve.process is not None and serve.process.poll() is None  # never restarted

            db = Database.from_url(embedded_url(data_dir))
            try:
                async with db.read() as conn:
                    found = await conn.execute(text("SELECT content FROM raw_dialogue"))
                    stored = set(found.scalars())
            finally:
                await db.dispose()
            assert set(acked) <= stored, f"lost {len(set(acked) - stored)} acknowledged turns"
            print(f"{len(acked)} turns acknowledged, all present")
        finally:
            serve.stop()
            stop_embedded_leftovers(data_dir)
            filler.unlink(missing_ok=True)


async def test_liveness_fails_while_the_database_cannot_come_back(scratch_dir: Path) -> None:
    data_dir = scratch_dir / "data"
    patience = {"GQL_MEMORY_EMBEDDED_GIVE_UP_S": "1", "GQL_MEMORY_EMBEDDED_RESTART_MAX_S": "1"}
    serve = ServeProcess(data_dir, env=patience).start()
    pgdata = data_dir / "pgdata"
    mode = pgdata.stat().st_mode
    try:
        async with httpx.AsyncClient(base_url=serve.base_url, timeout=30) as client:
            assert await store(client, "before")
            killed = postmaster_pid(data_dir)
            assert killed is not None
            pgdata.chmod(0)  # nothing can start in it (the server runs as another user)
            os.kill(killed, signal.SIGKILL)

            async def liveness_fails() -> bool:
                alive = await client.get("/healthz")
                return alive.status_code == 503 and alive.json()["database"] == "down"

            await until(serve, liveness_fails)
            print("/healthz:", (await client.get("/healthz")).json())
            ready = await client.get("/readyz")
            assert ready.status_code == 503 and ready.json()["reason"] == "exited"
            assert "/healthz now fails" in serve.log()

            pgdata.chmod(mode)  # the restarts never stopped: the next one succeeds

            async def back_and_alive() -> bool:
                alive = (await client.get("/healthz")).status_code == 200
                return alive and await store(client, "after")

            await until(serve, back_and_alive)
    finally:
        pgdata.chmod(mode)
        serve.stop()
        stop_embedded_leftovers(data_dir)
    assert postmaster_pid(data_dir) is None


def test_no_server_process_is_left_behind() -> None:
    """A guard for the tests above: every serve they started has exited."""
    import psutil

    children = psutil.Process(os.getpid()).children(recursive=True)
    assert not [p for p in children if process_alive(p.pid) and "serve" in p.cmdline()]
