"""Make mem0_get_all.json with the real mem0 (mem0ai 2.2.1 from PyPI), offline.

Not a dependency of gql_memory or its tests: run it by hand in a venv of its own, e.g.

    python -m venv /tmp/m0 && /tmp/m0/bin/pip install mem0ai==2.2.1
    MEM0_TELEMETRY=False /tmp/m0/bin/python tests/data/interchange/make_mem0.py

mem0 embeds every memory even with ``infer=False`` (no LLM call then): this script answers
its OpenAI client from a local stand-in for ``/v1/embeddings`` (deterministic vectors), and
keeps the vectors in an on-disk Qdrant of a temporary directory. The file written is exactly
what ``Memory.get_all`` returned for each of the ids below, one ``{"results": [...]}``
merged from them (the way a user would collect them), memories unique by id.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

os.environ.setdefault("MEM0_TELEMETRY", "False")

from mem0 import Memory  # noqa: E402

DIM = 8
OUT = Path(__file__).with_name("mem0_get_all.json")


def vector(text: str) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [b / 255 for b in digest[:DIM]]


class Embeddings(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        answer = json.dumps(
            {
                "object": "list",
                "model": body.get("model", "fake"),
                "data": [
                    {"object": "embedding", "index": i, "embedding": vector(str(t))}
                    for i, t in enumerate(inputs)
                ],
                "usage": {"prompt_tokens": 0, "total_tokens": 0},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    server = HTTPServer(("127.0.0.1", 0), Embeddings)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}/v1"
    with tempfile.TemporaryDirectory() as tmp:
        memory = Memory.from_config(
            {
                "embedder": {
                    "provider": "openai",
                    "config": {
                        "model": "fake-embedder",
                        "api_key": "offline",
                        "openai_base_url": base,
                        "embedding_dims": DIM,
                    },
                },
                "llm": {
                    "provider": "openai",
                    "config": {"model": "unused", "api_key": "offline", "openai_base_url": base},
                },
                "vector_store": {
                    "provider": "qdrant",
                    "config": {
                        "collection_name": "fixture",
                        "path": f"{tmp}/qdrant",
                        "embedding_model_dims": DIM,
                        "on_disk": True,
                    },
                },
                "history_db_path": f"{tmp}/history.db",
            }
        )
        memory.add(
            "Prefers green tea over coffee",
            user_id="alice",
            metadata={"category": "preferences"},
            infer=False,
        )
        memory.add(
            [
                {"role": "user", "content": "I moved to Berlin in March."},
                {"role": "assistant", "content": "Noted: you live in Berlin now."},
            ],
            user_id="alice",
            run_id="onboarding-1",
            infer=False,
        )
        memory.add(
            "Answer in German unless asked otherwise",
            user_id="alice",
            agent_id="travel-agent",
            metadata={"category": "style", "priority": 2, "tags": ["language", "tone"]},
            infer=False,
        )
        memory.add(
            "Bob is allergic to peanuts",
            user_id="bob",
            metadata={"source": "intake form"},
            infer=False,
        )
        memory.add(
            "Always confirm the booking reference before paying",
            agent_id="travel-agent",
            infer=False,
        )
        results: dict[str, dict[str, object]] = {}
        for filters in ({"user_id": "alice"}, {"user_id": "bob"}, {"agent_id": "travel-agent"}):
            for item in memory.get_all(filters=filters, top_k=100)["results"]:
                results.setdefault(item["id"], item)
        ordered = sorted(results.values(), key=lambda m: (str(m["created_at"]), str(m["id"])))
        OUT.write_text(json.dumps({"results": ordered}, indent=2, ensure_ascii=False) + "\n")
    server.shutdown()
    print(f"wrote {OUT} ({len(ordered)} memories)", file=sys.stderr)


if __name__ == "__main__":
    main()
