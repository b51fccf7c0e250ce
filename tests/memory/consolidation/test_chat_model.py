"""Consolidation with a chat model: the real `openai` client against a scripted local
OpenAI-compatible server writes the digest; a failing model leaves the extractive one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest_asyncio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.memory import Memory
from tests.conftest import start_live_server, truncate_all

SCRIPTED = "Maria booked a flight to Lisbon for the May conference on databases."


class ScriptedChat:
    """Answers /v1/chat/completions with ``reply`` (or ``status``), keeping each request."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.status = 200
        self.base_url = ""

    async def completions(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.requests.append(body)
        if self.status != 200:
            return JSONResponse({"error": {"message": "scripted failure"}}, self.status)
        return JSONResponse(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": SCRIPTED},
                        "finish_reason": "stop",
                    }
                ],
            }
        )


@pytest_asyncio.fixture(scope="module")
async def chat() -> AsyncIterator[ScriptedChat]:
    scripted = ScriptedChat()
    app = Starlette(routes=[Route("/v1/chat/completions", scripted.completions, methods=["POST"])])
    server, task, base_url = await start_live_server(app)
    scripted.base_url = f"{base_url}/v1"
    yield scripted
    server.should_exit = True
    await task


async def _session(memory: Memory) -> None:
    start = datetime.now(UTC) - timedelta(days=2)
    lines = [
        "I booked the flight to Lisbon for the conference in May.",
        "The conference in Lisbon is about distributed databases.",
        "Do you need a hotel near the venue?",
        "Yes, near the venue, under 150 euros a night.",
    ]
    for i, line in enumerate(lines):
        await memory.raw.store("trip", "Maria", line, timestamp=start + timedelta(minutes=i))


async def test_a_configured_chat_model_writes_the_digest(
    db: Database, settings: Settings, chat: ScriptedChat
) -> None:
    await truncate_all(db)
    chat.status, chat.requests[:] = 200, []
    memory = Memory(
        db,
        settings.with_overrides(
            consolidation_llm_base_url=chat.base_url, consolidation_llm_model="scripted-1"
        ),
    )
    await _session(memory)
    [action] = (await memory.consolidation.run()).actions
    digest = await memory.insights.get(action.target_id)
    assert digest is not None and SCRIPTED in digest.content
    assert action.evidence["written_by"] == "model"
    [request] = chat.requests
    assert request["model"] == "scripted-1"
    assert "Lisbon for the conference in May" in request["messages"][-1]["content"]


async def test_a_failing_chat_model_leaves_the_extractive_digest(
    db: Database, settings: Settings, chat: ScriptedChat
) -> None:
    await truncate_all(db)
    chat.status, chat.requests[:] = 500, []
    memory = Memory(
        db,
        settings.with_overrides(
            consolidation_llm_base_url=chat.base_url, consolidation_llm_model="scripted-2"
        ),
    )
    await _session(memory)
    [action] = (await memory.consolidation.run()).actions
    digest = await memory.insights.get(action.target_id)
    assert digest is not None and "Lisbon" in digest.content and SCRIPTED not in digest.content
    assert action.evidence["written_by"] == "extractive" and chat.requests
