"""Consolidation with a chat model: the real `openai` client against a scripted local
OpenAI-compatible server writes the digest; a failing model leaves the extractive one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
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


@pytest.mark.parametrize(
    ("status", "written_by"), [(200, "model"), (500, "extractive")], ids=["answers", "fails"]
)
async def test_a_chat_model_writes_the_digest_and_a_failing_one_leaves_the_extractive(
    db: Database, settings: Settings, chat: ScriptedChat, status: int, written_by: str
) -> None:
    await truncate_all(db)
    chat.status, chat.requests[:] = status, []
    memory = Memory(
        db,
        settings.with_overrides(
            consolidation_llm_base_url=chat.base_url, consolidation_llm_model=f"scripted-{status}"
        ),
    )
    await _session(memory)
    [action] = (await memory.consolidation.run()).actions
    digest = await memory.insights.get(action.target_id)
    assert digest is not None and "Lisbon" in digest.content
    assert action.evidence["written_by"] == written_by
    assert (SCRIPTED in digest.content) is (status == 200)
    [request, *_] = chat.requests
    assert request["model"] == f"scripted-{status}"
    assert "Lisbon for the conference in May" in request["messages"][-1]["content"]
