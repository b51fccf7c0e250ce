"""A scripted model for the OpenAI Agents SDK's ``Runner``: the SDK's own ``Model``
interface, no network. It answers from what it is sent, so a test can see what history a
run on our session gave it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, function_tool
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}, 21 C"


class ScriptedModel(Model):
    """Asks for the weather tool when the user says "weather in <city>", reports the tool's
    output after it, and otherwise says how many items of history it was sent."""

    def __init__(self) -> None:
        self.inputs: list[list[TResponseInputItem]] = []

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        self.inputs.append(items)
        last = items[-1]
        n = len(self.inputs)
        if last.get("type") == "function_call_output":
            return _response(_message(f"The tool says: {last['output']}", n))
        text = str(last.get("content", ""))
        if text.startswith("weather in "):
            city = text.removeprefix("weather in ")
            call = ResponseFunctionToolCall(
                type="function_call",
                name="weather",
                arguments=json.dumps({"city": city}),
                call_id=f"call-{n}",
                id=f"fc-{n}",
                status="completed",
            )
            return _response(call)
        return _response(_message(f"I was sent {len(items)} items; you said: {text}", n))

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("the tests run without streaming")


def _message(text: str, n: int) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=f"msg-{n}",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def _response(output: Any) -> ModelResponse:
    return ModelResponse(output=[output], usage=Usage(), response_id=None)


def scripted_agent(model: ScriptedModel) -> Agent[Any]:
    return Agent(name="assistant", instructions="Be brief.", model=model, tools=[weather])
