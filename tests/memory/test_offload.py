"""CPU-bound work on large inputs leaves the event loop free (gql_memory.memory.offload)."""

from __future__ import annotations

import asyncio
import threading

from gql_memory.config import INLINE_CPU_CHARS, Settings
from gql_memory.memory import Memory
from gql_memory.memory.offload import run_cpu

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
