"""The OpenAI Agents SDK's Session over raw dialogue: the SDK's own Runner, a scripted Model
(no network), and a second process that resumes the conversation."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from agents import Runner, set_tracing_disabled
from agents.memory import Session, SessionSettings

from gql_memory import AsyncMemoryStore, MemoryStore
from gql_memory.config import Settings
from gql_memory.integrations.openai_agents import MemorySession
from tests.conftest import ROOT
from tests.integrations.agents_model import ScriptedModel, scripted_agent

set_tracing_disabled(True)  # the SDK would otherwise export traces to OpenAI

TOOL_CALL = {
    "arguments": '{"city": "Paris"}',
    "call_id": "call-2",
    "name": "weather",
    "type": "function_call",
    "id": "fc-2",
    "status": "completed",
}
TOOL_OUTPUT = {
    "call_id": "call-2",
    "output": "Sunny in Paris, 21 C",
    "type": "function_call_output",
}


def message(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": text}


async def test_it_is_a_session_of_the_sdk(async_store: AsyncMemoryStore) -> None:
    assert isinstance(MemorySession("s", async_store), Session)


async def test_items_round_trip_exactly_tool_calls_included(async_store: AsyncMemoryStore) -> None:
    session = MemorySession("chat", async_store)
    odd = {"type": "reasoning", "id": "rs-1", "summary": [], "encrypted_content": "x\ny é 1.5"}
    items: list[Any] = [message("user", "weather?"), TOOL_CALL, TOOL_OUTPUT, odd]
    await session.add_items(items[:2])
    await session.add_items(items[2:])
    assert await session.get_items() == items
    assert await session.get_items(limit=3) == items[1:]
    assert await session.get_items(limit=0) == []
    turns = (await async_store.raw.list(session_id="chat")).items
    assert [t.speaker for t in reversed(turns)] == [
        "user",
        "function_call",
        "function_call_output",
        "reasoning",
    ]
    assert turns[2].content == 'weather({"city": "Paris"})'  # searchable text


async def test_pop_item_archives_the_newest_item_to_stale_memory(
    async_store: AsyncMemoryStore,
) -> None:
    session = MemorySession("chat", async_store)
    items: list[Any] = [message("user", "one"), message("assistant", "two"), TOOL_CALL]
    await session.add_items(items)
    assert await session.pop_item() == TOOL_CALL
    assert await session.get_items() == items[:2]
    await session.add_items([message("user", "three")])
    assert await session.pop_item() == message("user", "three")
    assert await session.pop_item() == message("assistant", "two")
    assert await session.get_items() == items[:1]
    archived = (await async_store.stale.list(session_id="chat")).items
    assert [a.original_content for a in archived] == [
        "assistant: two",
        "user: three",
        'function_call: weather({"city": "Paris"})',
    ]
    assert len((await async_store.raw.list(session_id="chat")).items) == 4  # none lost
    await session.clear_session()
    assert await session.get_items() == []
    assert await session.pop_item() is None


async def test_a_working_item_archived_with_a_ref_to_a_turn_does_not_pop_it(
    async_store: AsyncMemoryStore,
) -> None:
    session = MemorySession("chat", async_store)
    await session.add_items([message("user", "keep me")])
    [turn] = (await async_store.raw.list(session_id="chat")).items
    note = await async_store.working.add(
        "about it", session_id="chat", ref_kind="RAW", ref_id=turn.id
    )
    await async_store.working.archive(note.added_id)
    assert await session.get_items() == [message("user", "keep me")]
    assert await session.pop_item() == message("user", "keep me")


async def test_concurrent_pops_each_archive_another_item(async_store: AsyncMemoryStore) -> None:
    session = MemorySession("chat", async_store)
    items: list[Any] = [message("user", str(i)) for i in range(8)]
    await session.add_items(items)
    popped = await asyncio.gather(*(session.pop_item() for _ in range(10)))
    assert sorted(p["content"] for p in popped if p) == sorted(str(i) for i in range(8))
    assert popped.count(None) == 2
    assert await session.get_items() == []


async def test_session_settings_limit_applies_when_no_limit_is_given(
    async_store: AsyncMemoryStore,
) -> None:
    session = MemorySession("chat", async_store, SessionSettings(limit=1))
    await session.add_items([message("user", "one"), message("user", "two")])
    assert await session.get_items() == [message("user", "two")]
    assert len(await session.get_items(limit=5)) == 2


async def test_turns_stored_otherwise_read_as_messages(async_store: AsyncMemoryStore) -> None:
    await async_store.raw.store("chat", "assistant", "stored by the app")
    await async_store.raw.store("chat", "planner", "a note")
    assert await MemorySession("chat", async_store).get_items() == [
        message("assistant", "stored by the app"),
        message("user", "planner: a note"),
    ]


async def test_a_synchronous_store_serves_async_code_from_its_own_thread(
    sync_store: MemoryStore,
) -> None:
    session = MemorySession("chat", sync_store)
    await session.add_items([message("user", "hi")])
    assert await session.get_items() == [message("user", "hi")]
    assert await session.pop_item() == message("user", "hi")


RESUME = textwrap.dedent(
    """
    import asyncio, json, sys
    from agents import Runner, set_tracing_disabled
    from gql_memory import MemoryStore
    from gql_memory.integrations.openai_agents import MemorySession
    from tests.integrations.agents_model import ScriptedModel, scripted_agent

    set_tracing_disabled(True)
    url, namespace = sys.argv[1:3]

    async def main(store: MemoryStore) -> None:
        model = ScriptedModel()
        result = await Runner.run(
            scripted_agent(model), "what did I ask?", session=MemorySession("chat", store)
        )
        print(json.dumps({"final": result.final_output, "sent": model.inputs[0]}))

    with MemoryStore(url, namespace=namespace, migrate=False) as store:
        asyncio.run(main(store))
    """
)


async def test_runner_three_turns_then_another_process_resumes(
    async_store: AsyncMemoryStore, settings: Settings, namespace: str
) -> None:
    model = ScriptedModel()
    agent = scripted_agent(model)
    session = MemorySession("chat", async_store)
    answers = [
        (await Runner.run(agent, text, session=session)).final_output
        for text in ("hello", "weather in Paris", "thanks")
    ]
    assert answers == [
        "I was sent 1 items; you said: hello",
        "The tool says: Sunny in Paris, 21 C",
        "I was sent 7 items; you said: thanks",
    ]
    history = await session.get_items()
    assert len(history) == 8
    assert history[3]["type"] == "function_call"  # type: ignore[typeddict-item]
    assert history[4] == TOOL_OUTPUT
    assert model.inputs[-1] == history[:7]  # the model saw the session's items, exactly

    env = {**os.environ, "OPENAI_AGENTS_DISABLE_TRACING": "1"}
    assert settings.database_url
    done = subprocess.run(
        [sys.executable, "-c", RESUME, settings.database_url, namespace],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    resumed = json.loads(done.stdout.strip().splitlines()[-1])
    assert resumed["sent"] == [*history, message("user", "what did I ask?")]
    assert resumed["final"] == "I was sent 9 items; you said: what did I ask?"
    assert len(await session.get_items()) == 10
    with pytest.raises(TypeError):
        MemorySession("chat", object())  # type: ignore[arg-type]
