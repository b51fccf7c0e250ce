"""A local fake of the OpenAI `/v1/embeddings` endpoint, for tests that use the real client.

Tests control it: known vectors per text, scripted failures (status codes answered before
success), a wrong dimension, hanging (a request accepted and never answered until released),
and a log of every request body received.
"""

from __future__ import annotations

import asyncio
import zlib
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from gql_memory.embeddings.hashed import HashEmbedder


def model_mark(model: str) -> float:
    """The value a marking fake puts last in every vector of ``model`` (2.0 to 2.999)."""
    return 2.0 + zlib.crc32(model.encode()) % 1000 / 1000


@dataclass
class FakeOpenAI:
    dim: int = 384
    vectors: dict[str, list[float]] = field(default_factory=dict)
    failures: list[int] = field(default_factory=list)
    always_fail: int | None = None
    wrong_dim: bool = False
    requests: list[dict[str, Any]] = field(default_factory=list)
    base_url: str = ""
    # every vector's last component marks the model that made it (see ``model_mark``)
    mark_models: bool = False
    # answer 500 to every request after this many (an embedding run "killed" part-way)
    fail_after: int | None = None
    # while set, every request is accepted and left unanswered until ``release`` (the
    # embedding server that "accepted connections and never answered", issue 43)
    hanging: asyncio.Event | None = None
    # texts answered 400 (a provider that is up and refuses them)
    refuse: set[str] = field(default_factory=set)

    def hang(self) -> None:
        self.hanging = asyncio.Event()

    def release(self) -> None:
        if self.hanging is not None:
            self.hanging.set()
            self.hanging = None

    def reset(self) -> None:
        self.vectors.clear()
        self.failures.clear()
        self.requests.clear()
        self.always_fail = None
        self.wrong_dim = False
        self.mark_models = False
        self.fail_after = None
        self.refuse.clear()
        self.release()

    def set_vector(self, text: str, components: list[float]) -> None:
        """A known vector for ``text``: the given leading components, zero-padded."""
        self.vectors[text] = components + [0.0] * (self.dim - len(components))

    def vector_for(self, text: str) -> list[float]:
        if text in self.vectors:
            return self.vectors[text]
        return HashEmbedder(self.dim).embed_one(text)

    async def embeddings(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.requests.append({"body": body, "authorization": request.headers.get("authorization")})
        if self.hanging is not None:
            await self.hanging.wait()
        status = self.always_fail or (self.failures.pop(0) if self.failures else None)
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        if self.refuse.intersection(inputs):
            status = status or 400
        if self.fail_after is not None and len(self.requests) > self.fail_after:
            status = 500
        if status:
            return JSONResponse(
                {"error": {"message": "scripted failure", "type": "server_error", "code": None}},
                status_code=status,
            )
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        size = self.dim + 1 if self.wrong_dim else self.dim
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": self._marked((self.vector_for(t) + [0.0])[:size], body["model"]),
            }
            for i, t in enumerate(inputs)
        ]
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "model": body["model"],
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            }
        )

    def _marked(self, vector: list[float], model: str) -> list[float]:
        if self.mark_models:
            vector = [*vector[:-1], model_mark(model)]
        return vector

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/embeddings", self.embeddings, methods=["POST"])])
