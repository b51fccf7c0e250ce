"""CPU-bound work on large inputs leaves the event loop free, and work an input can blow up
runs in worker processes that stop it at a CPU ceiling and queue nobody
(gql_memory.memory.offload)."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from gql_memory.config import INLINE_CPU_CHARS, Settings
from gql_memory.memory import Memory
from gql_memory.memory.offload import (
    CeilingReached,
    WorkerLost,
    WorkerProcesses,
    WorkersBusy,
    run_cpu,
)

TOKEN = "ghp_u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8d"


async def test_small_work_runs_inline_and_large_work_in_a_worker_thread() -> None:
    here = threading.get_ident()
    assert await run_cpu(INLINE_CPU_CHARS, threading.get_ident) == here
    assert await run_cpu(INLINE_CPU_CHARS + 1, threading.get_ident) != here


async def ticks_during(work: asyncio.Future[object] | asyncio.Task[object]) -> int:
    """How often another task got the event loop while ``work`` ran."""
    ticks = 0
    while not work.done():
        await asyncio.sleep(0)
        ticks += 1
    await work
    return ticks


async def test_a_large_tool_output_is_summarized_and_redacted_off_the_loop(
    memory: Memory,
) -> None:
    lines = [f"src/module_{n}.py:{n}: error near GITHUB_TOKEN={TOKEN}" for n in range(20_000)]
    output = "\n".join(lines)  # ~1.5 MB of grep output with secrets to redact
    ingest = asyncio.ensure_future(memory.extraction.ingest("Grep", output, session_id="big"))
    assert await ticks_during(ingest) > 10
    assert ingest.result().stored
    assert TOKEN not in str(await memory.working.list("big"))


async def test_large_turns_are_redacted_off_the_loop(memory: Memory, settings: Settings) -> None:
    gated = Memory(memory.db, settings.with_overrides(redact_raw_dialogue=True))
    content = " ".join(f"GITHUB_TOKEN={TOKEN} and more words" for _ in range(10_000))
    store = asyncio.ensure_future(gated.raw.store("big", "user", content))
    assert await ticks_during(store) > 10
    stored = store.result()
    assert TOKEN not in stored.content


# --- worker processes ----------------------------------------------------------------------

HANG_GUARD_S = 60.0  # not a bound on anything measured: turns a hang into a failure


def spin() -> None:
    """Work that never ends by itself."""
    while True:
        pass


def read_fifo(path: str) -> str:
    """Work that waits, using no CPU, until the test writes to the FIFO at ``path``."""
    with open(path) as fifo:
        return fifo.read()


def write_fifo(path: Path, text: str) -> None:
    with path.open("w") as fifo:
        fifo.write(text)


async def run(workers: WorkerProcesses, work: object, *args: object, **bounds: float) -> object:
    limits = {"cpu_seconds": HANG_GUARD_S, "wait_seconds": HANG_GUARD_S}
    limits["kill_after_s"] = HANG_GUARD_S
    return await workers.run(work, args, **(limits | bounds))  # type: ignore[arg-type]


async def test_work_over_its_cpu_ceiling_is_stopped_and_its_worker_serves_on() -> None:
    workers = WorkerProcesses(1, waiting=0, name="test-ceiling")
    pid = await run(workers, os.getpid)
    assert pid != os.getpid()
    with pytest.raises(CeilingReached, match="stopped after 20 ms of CPU time"):
        await run(workers, spin, cpu_seconds=0.02)
    assert await run(workers, os.getpid) == pid  # the same process, not a replacement
    assert (workers.stopped, workers.killed) == (1, 0)


async def test_a_call_that_finds_every_worker_busy_is_refused_not_queued(
    scratch_dir: Path,
) -> None:
    """One worker, one place to wait: while the worker is held, a second call waits and a
    third is refused at once; the waiting one is served when the worker is free."""
    fifo = scratch_dir / "hold"
    os.mkfifo(fifo)
    workers = WorkerProcesses(1, waiting=1, name="test-busy")
    held = asyncio.ensure_future(run(workers, read_fifo, str(fifo)))
    await asyncio.sleep(0)  # it takes the one worker (starting it)
    waiting = asyncio.ensure_future(run(workers, os.getpid))
    await asyncio.sleep(0)  # it takes the one place to wait
    with pytest.raises(WorkersBusy, match="all 1 workers busy, 1 calls waiting"):
        await run(workers, os.getpid)
    assert not held.done() and not waiting.done()
    await asyncio.to_thread(write_fifo, fifo, "released")
    assert await held == "released"
    assert await waiting != os.getpid()


async def test_a_worker_that_does_not_answer_is_killed_and_replaced(scratch_dir: Path) -> None:
    fifo = scratch_dir / "never"
    os.mkfifo(fifo)
    workers = WorkerProcesses(1, waiting=0, name="test-kill")
    first = await run(workers, os.getpid)
    with pytest.raises(WorkerLost, match="no answer after 0.2 s: killed"):
        await run(workers, read_fifo, str(fifo), kill_after_s=0.2)  # nobody ever writes
    second = await run(workers, os.getpid)
    assert second != first and workers.killed == 1
