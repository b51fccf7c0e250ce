"""Letta's Agent File (``.af``) as raw dialogue and insights.

The format is Letta's ``AgentFileSchema`` (letta/schemas/agent_file.py): ``{"agents": [{"id",
"name", "messages": [...], "block_ids": [...], ...}], "blocks": [{"id", "label", "value",
"description", ...}], "tools", "groups", ...}``; the older one-agent form (Letta 0.6, with
``core_memory`` for the blocks) is read too. A message is ``{"id", "role", "content": [parts]
or a string, "tool_calls", "tool_call_id", "name", "created_at", ...}``.

- Each agent's messages become raw dialogue in one session, named after the agent (with the
  session prefix; an agent name the file repeats gets its file id appended). The speaker is
  the role (user, assistant, tool); the timestamp Letta's created_at.
- What a message says: its text parts. A ``user_message`` envelope (``{"type":
  "user_message", "message": ...}``) is unwrapped to the message; an assistant's
  ``send_message`` call is what it said, its text then its inner thoughts. A message with no
  text says its tool calls (``name(arguments)``), else its reasoning. Reasoning, tool calls,
  the tool call a return answers, the model and Letta's ids are kept under ``metadata.letta``.
- System messages (the compiled system prompt) are not dialogue: they are left out.
- Each memory block with a value becomes an insight, its label, description, limit and the
  agents that use it under ``metadata.letta``.

Keys are digests of what each record is, so importing the same file again adds nothing.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gql_memory.errors import ValidationError
from gql_memory.memory.importer import IMPORT_KEY
from gql_memory.memory.insights import InsightInput
from gql_memory.memory.interchange.keyed_insights import KeyedInsight
from gql_memory.memory.interchange.located_json import invalid, item_lines, parse_json, read_text
from gql_memory.memory.raw import RawDialogueInput
from gql_memory.memory.validation import require_json_object, require_session_id, require_text

SOURCE = "letta"
SPOKEN = ("user", "assistant", "tool", "function", "approval")
SEND_MESSAGE = "send_message"


@dataclass(frozen=True)
class LettaFile:
    turns: list[RawDialogueInput]
    blocks: list[KeyedInsight]
    agents: int
    system_messages: int  # left out
    empty: int  # messages and blocks with nothing to store


def _key(*parts: Any) -> str:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:32]


def read_letta(path: Path, session_prefix: str = "") -> LettaFile:
    """Parse and validate a whole agent file."""
    text = read_text(path)
    document = parse_json(text)
    if isinstance(document, str):  # some published files are a JSON string of the JSON
        text, document = document, parse_json(document)
    if isinstance(document, dict) and isinstance(document.get("agents"), list):
        agents = document["agents"]
        blocks = document.get("blocks") or []
        message_lines = item_lines(text, ("agents", "*", "messages", "*"))
        block_lines = item_lines(text, ("blocks", "*"))
        agent_lines = item_lines(text, ("agents", "*"))
    elif isinstance(document, dict) and isinstance(document.get("messages"), list):
        agents = [{**document, "block_ids": None}]  # Letta 0.6: the file is the agent
        blocks = document.get("core_memory") or []
        message_lines = [item_lines(text, ("messages", "*"))]
        block_lines = item_lines(text, ("core_memory", "*"))
        agent_lines = [1]
    else:
        raise invalid("line 1", 'an agent file is a JSON object with "agents" (or "messages")')
    if not isinstance(blocks, list):
        raise invalid("line 1", "blocks must be a list")
    names = [a.get("name") if isinstance(a, dict) else None for a in agents]
    turns: list[RawDialogueInput] = []
    users: dict[str, list[str]] = {}  # block id -> names of the agents that use it
    system = empty = 0
    for index, agent in enumerate(agents):
        where = f"line {agent_lines[index] if index < len(agent_lines) else 1}"
        if not isinstance(agent, dict):
            raise invalid(where, "an agent must be a JSON object")
        try:
            name = require_text(agent.get("name"), "agent name", max_length=200)
            session = require_session_id(
                session_prefix + (name if names.count(name) == 1 else f"{name}-{agent.get('id')}")
            )
        except ValidationError as exc:
            raise invalid(where, str(exc)) from exc
        block_ids = agent.get("block_ids")
        if block_ids is None:  # Letta 0.6: the agent's own blocks
            block_ids = [_block_id(b, i) for i, b in enumerate(blocks)]
        for block_id in block_ids if isinstance(block_ids, list) else []:
            if name not in users.setdefault(str(block_id), []):
                users[str(block_id)].append(name)
        messages = agent.get("messages") or []
        if not isinstance(messages, list):
            raise invalid(where, "messages must be a list")
        lines = message_lines[index] if index < len(message_lines) else []
        for position, message in enumerate(messages):
            at = f"line {lines[position]}" if position < len(lines) else where
            try:
                turn = _turn(message, session, name, agent.get("id"), position)
            except ValidationError as exc:
                raise invalid(at, str(exc)) from exc
            if turn is None:
                if message.get("role") == "system":
                    system += 1
                else:
                    empty += 1
                continue
            turns.append(replace(turn, origin=at))
    insights: dict[str, KeyedInsight] = {}
    for position, block in enumerate(blocks):
        at = f"line {block_lines[position]}" if position < len(block_lines) else "line 1"
        try:
            item = _block(block, users.get(_block_id(block, position), []))
        except ValidationError as exc:
            raise invalid(at, str(exc)) from exc
        if item is None:
            empty += 1
        else:
            insights.setdefault(item.key, item)
    return LettaFile(turns, list(insights.values()), len(agents), system, empty)


def _turn(
    message: Any, session: str, agent: str, agent_id: Any, position: int
) -> RawDialogueInput | None:
    if not isinstance(message, dict):
        raise ValidationError("a message must be a JSON object")
    role = message.get("role")
    if role == "system":
        return None
    if role not in SPOKEN:
        raise ValidationError(f"role must be one of system, {', '.join(SPOKEN)}, not {role!r}")
    texts, reasoning, calls = _parts(message)
    letta: dict[str, Any] = {"agent": agent}
    for field in ("id", "model", "name", "tool_call_id", "group_id"):
        if message.get(field) is not None:
            letta[field if field != "id" else "message_id"] = message[field]
    if agent_id is not None:
        letta["agent_id"] = agent_id
    said = [
        str(args["message"])
        for name, args in calls
        if name == SEND_MESSAGE and isinstance(args, dict) and args.get("message")
    ]
    if said:  # MemGPT style: the reply is the send_message call, the text its thoughts
        content = "\n".join(said)
        reasoning = texts + reasoning
    elif texts:
        content = "\n".join(texts)
    elif calls:
        content = "\n".join(f"{name}({_arguments(args)})" for name, args in calls)
    elif reasoning:
        content, reasoning = "\n".join(reasoning), []
    else:
        return None
    envelope = _envelope(content) if role == "user" else None
    if envelope is not None:
        letta["envelope"] = envelope.get("type")
        if envelope.get("type") == "user_message" and isinstance(envelope.get("message"), str):
            content = envelope["message"] or content
    if reasoning:
        letta["reasoning"] = "\n".join(reasoning)
    if calls:
        letta["tool_calls"] = [{"name": n, "arguments": a} for n, a in calls]
    metadata = {"source": SOURCE, SOURCE: letta}
    require_json_object(metadata, "metadata")
    moment = _moment(message.get("created_at"))
    key = _key(
        SOURCE, session, message.get("id", position), message.get("created_at"), role, content
    )
    metadata[IMPORT_KEY] = key
    return RawDialogueInput(
        session, str(role), require_text(content, "content"), metadata, moment, import_key=key
    )


def _parts(message: dict[str, Any]) -> tuple[list[str], list[str], list[tuple[str, Any]]]:
    """The message's text, reasoning and tool calls (name, parsed arguments)."""
    content = message.get("content")
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    if not isinstance(parts, list):
        raise ValidationError("content must be a string or a list of parts")
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[tuple[str, Any]] = []
    for part in parts:
        if not isinstance(part, dict):
            raise ValidationError("a content part must be a JSON object")
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str) and part["text"].strip():
            texts.append(part["text"].strip())
        elif kind == "reasoning" and isinstance(part.get("reasoning"), str):
            reasoning.append(part["reasoning"])
        elif kind == "tool_call" and isinstance(part.get("name"), str):
            calls.append((part["name"], part.get("input")))
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise ValidationError("a tool call needs a function with a name")
        calls.append((function["name"], _parsed(function.get("arguments"))))
    return texts, reasoning, calls


def _parsed(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def _arguments(arguments: Any) -> str:
    return json.dumps(arguments, ensure_ascii=False) if arguments not in (None, {}) else ""


def _envelope(content: str) -> dict[str, Any] | None:
    """Letta's JSON wrapping of what reached the agent (user_message, login, heartbeat...)."""
    if not content.startswith("{"):
        return None
    try:
        value = json.loads(content)
    except ValueError:
        return None
    return value if isinstance(value, dict) and isinstance(value.get("type"), str) else None


def _moment(value: Any) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError("created_at must be an ISO-8601 string")
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValidationError(f"created_at {value!r} is not ISO-8601") from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _block_id(block: Any, position: int) -> str:
    """A block's file id (Letta 0.6 blocks have none: their place in the list)."""
    given = block.get("id") if isinstance(block, dict) else None
    return str(given) if given is not None else f"#{position}"


def _block(block: Any, agents: list[str]) -> KeyedInsight | None:
    if not isinstance(block, dict):
        raise ValidationError("a block must be a JSON object")
    value, label = block.get("value"), block.get("label")
    if not isinstance(value, str):
        raise ValidationError("a block's value must be a string")
    if not value.strip():
        return None
    label = require_text(label, "label", max_length=255)
    letta: dict[str, Any] = {"block": label}
    for field in ("id", "description", "limit", "read_only"):
        if block.get(field) is not None:
            letta[field if field != "id" else "block_id"] = block[field]
    if agents:
        letta["agents"] = agents
    metadata: dict[str, Any] = {"source": SOURCE, SOURCE: letta}
    require_json_object(metadata, "metadata")
    key = "letta-block:" + _key(label, value)
    metadata[IMPORT_KEY] = key
    return KeyedInsight(key, InsightInput(require_text(value, "value"), [], metadata))
