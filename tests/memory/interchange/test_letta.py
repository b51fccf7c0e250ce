"""Letta Agent Files (a real one from letta-ai/agent-file, trimmed): each agent's messages as
raw dialogue in a session of its own, memory blocks as insights."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gql_memory.errors import ValidationError
from gql_memory.memory import Memory
from gql_memory.memory.interchange.foreign import import_foreign, read_foreign
from gql_memory.memory.interchange.letta import read_letta
from tests.memory.interchange.conftest import LETTA


def agent_file() -> dict[str, Any]:
    return json.loads(LETTA.read_text())


async def test_messages_become_one_session_per_agent_and_blocks_insights(
    target: Memory, memory: Memory
) -> None:
    summary = await import_foreign(target, read_foreign(LETTA, "letta", "imported"))
    document = agent_file()
    spoken = [[m for m in a["messages"] if m["role"] != "system"] for a in document["agents"]]
    assert summary.parts == [
        ("message", sum(map(len, spoken)), sum(map(len, spoken))),
        ("memory block", len(document["blocks"]), len(document["blocks"])),
    ]
    for agent, messages in zip(document["agents"], spoken, strict=True):
        turns = (await target.raw.list(session_id=agent["name"], first=100)).items
        assert len(turns) == len(messages)
        by_id = {t.metadata["letta"]["message_id"]: t for t in turns}
        for message in messages:
            turn = by_id[message["id"]]
            assert turn.speaker == message["role"]
            assert turn.timestamp.isoformat() == message["created_at"]
            texts = [p["text"].strip() for p in message["content"] if p["type"] == "text"]
            if any(texts):
                assert turn.content == "\n".join(t for t in texts if t)
            reasoning = [p["reasoning"] for p in message["content"] if p["type"] == "reasoning"]
            assert turn.metadata["letta"].get("reasoning") == ("\n".join(reasoning) or None)
            if message.get("tool_calls"):
                names = [c["name"] for c in turn.metadata["letta"]["tool_calls"]]
                assert names == [c["function"]["name"] for c in message["tool_calls"]]
    insights = (await target.insights.list(first=100)).items
    blocks = {b["id"]: b for b in document["blocks"]}
    assert sorted(i.content for i in insights) == sorted(b["value"] for b in blocks.values())
    shared = next(i for i in insights if i.metadata["letta"]["block_id"] == "block-0")
    assert shared.metadata["letta"]["block"] == blocks["block-0"]["label"]
    assert shared.metadata["letta"]["agents"] == [a["name"] for a in document["agents"]]
    assert (await memory.raw.list()).items == []


async def test_importing_again_adds_nothing(target: Memory) -> None:
    parsed = read_foreign(LETTA, "letta", "imported")
    await import_foreign(target, parsed)
    again = await import_foreign(target, parsed)
    assert [added for _, _, added in again.parts] == [0, 0]


def test_memgpt_replies_and_user_envelopes_are_what_was_said(tmp_path: Path) -> None:
    """Letta 0.6's one-agent form, the MemGPT way: the reply is the send_message call, the
    text its inner thoughts; a user_message envelope is unwrapped."""
    message = {"type": "user_message", "message": "hi, I am Sarah", "time": "now"}
    document = {
        "name": "memgpt_agent",
        "core_memory": [{"label": "human", "value": "First name: Sarah", "limit": 5000}],
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "You are Letta"}]},
            {"role": "user", "content": [{"type": "text", "text": json.dumps(message)}]},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "She told me her name."}],
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {
                            "name": "send_message",
                            "arguments": json.dumps({"message": "Nice to meet you, Sarah!"}),
                        },
                    }
                ],
                "created_at": "2025-03-24T03:04:43+00:00",
            },
        ],
    }
    path = tmp_path / "old.af"
    path.write_text(json.dumps(document))
    parsed = read_letta(path, "letta-")
    assert [(t.session_id, t.speaker, t.content) for t in parsed.turns] == [
        ("letta-memgpt_agent", "user", "hi, I am Sarah"),
        ("letta-memgpt_agent", "assistant", "Nice to meet you, Sarah!"),
    ]
    assert parsed.turns[1].metadata["letta"]["reasoning"] == "She told me her name."
    assert parsed.system_messages == 1
    assert [b.insight.content for b in parsed.blocks] == ["First name: Sarah"]


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (lambda d: d["agents"][1]["messages"][3].update(role="robot"), "line 458: role must"),
        (lambda d: d["agents"][1]["messages"][3].update(content=7), "line 458: content must"),
        (lambda d: d["agents"][1]["messages"][3].update(created_at="x"), "line 458: created_at"),
        (lambda d: d["blocks"][2].update(value=None), "line "),
        (lambda d: d["agents"][0].update(name=""), "line 3: agent name must not be empty"),
    ],
)
def test_a_bad_record_is_one_error_naming_its_line(tmp_path: Path, change: Any, error: str) -> None:
    document = agent_file()
    change(document)
    path = tmp_path / "agent.af"
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False))
    with pytest.raises(ValidationError) as raised:
        read_letta(path)
    assert str(raised.value).startswith(error), str(raised.value)
