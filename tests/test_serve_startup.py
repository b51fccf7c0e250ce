"""What `gql-memory serve` says before and as it starts: a port in use and an unreachable
embedding server are one line each, before PostgreSQL starts; on a terminal the logs are
readable lines, each said once, under a short banner (GraphiQL, dashboard, data dir,
embedder, API keys)."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.processes import GQL_MEMORY, free_port

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
HANG_GUARD_S = 120  # not a bound on anything: a hung start fails instead of hanging the suite


def serve_env(**changes: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GQL_MEMORY_", "OPENAI_"))}
    env.pop("DATABASE_URL", None)
    return {**env, "GQL_MEMORY_EMBEDDING_PROVIDER": "hash", **changes}


def serve(data_dir: Path, port: int, **env: str) -> subprocess.CompletedProcess[str]:
    """serve that is expected to refuse: its exit status, stdout and stderr."""
    return subprocess.run(
        [str(GQL_MEMORY), "serve", "--port", str(port), "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        env=serve_env(**env),
        timeout=HANG_GUARD_S,
    )


@pytest.fixture
def listening() -> Iterator[socket.socket]:
    """A socket listening on a loopback port, accepting nothing (the port is in use; a client
    connects into its backlog and never hears back)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield sock


def test_a_port_in_use_is_one_line_before_anything_starts(
    listening: socket.socket, scratch_dir: Path
) -> None:
    port = listening.getsockname()[1]
    done = serve(scratch_dir / "data", port)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == f"error: port {port} is in use; set GQL_MEMORY_PORT or --port"
    assert not (scratch_dir / "data").exists()  # PostgreSQL never started


def test_an_unreachable_embedding_server_refuses_to_start(scratch_dir: Path) -> None:
    closed = free_port()  # nothing listens there: connection refused
    url = f"http://127.0.0.1:{closed}/v1"
    done = serve(
        scratch_dir / "data",
        free_port(),
        GQL_MEMORY_EMBEDDING_PROVIDER="openai",
        OPENAI_BASE_URL=url,
        GQL_MEMORY_EMBEDDING_DIM="768",
    )
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith(f"error: the embedding server at {url} (model "), line
    assert "cannot be reached" in line and "refused" in line.lower(), line
    assert not (scratch_dir / "data").exists()


def test_an_embedding_server_that_never_answers_refuses_within_the_check(
    listening: socket.socket, scratch_dir: Path
) -> None:
    url = f"http://127.0.0.1:{listening.getsockname()[1]}/v1"
    done = serve(
        scratch_dir / "data",
        free_port(),
        GQL_MEMORY_EMBEDDING_PROVIDER="openai",
        OPENAI_BASE_URL=url,
        GQL_MEMORY_EMBEDDING_STARTUP_CHECK_S="0.5",
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: the embedding server at {url} (model text-embedding-3-small) did not answer "
        "within 0.5 s"
    )


def read_until(fd: int, process: subprocess.Popen[bytes], marker: str) -> str:
    """What the process wrote to the terminal until ``marker`` appeared (polled)."""
    seen = b""
    deadline = time.monotonic() + HANG_GUARD_S
    while marker not in ANSI.sub("", seen.decode(errors="replace")):
        assert time.monotonic() < deadline, seen.decode(errors="replace")
        assert process.poll() is None, seen.decode(errors="replace")
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            seen += os.read(fd, 65536)
    return ANSI.sub("", seen.decode(errors="replace"))


def import_beside(data_dir: Path, transcript: Path) -> subprocess.CompletedProcess[str]:
    """`gql-memory import` into the data dir of a running serve (it attaches to its server)."""
    transcript.write_text('{"session_id": "s", "speaker": "user", "content": "hello"}\n')
    return subprocess.run(
        [str(GQL_MEMORY), "import", str(transcript), "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        env=serve_env(),
        timeout=HANG_GUARD_S,
    )


def test_on_a_terminal_logs_are_readable_lines_under_a_banner(scratch_dir: Path) -> None:
    port = free_port()
    data_dir = scratch_dir / "data"
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [str(GQL_MEMORY), "serve", "--port", str(port), "--data-dir", str(data_dir)],
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        env=serve_env(COLUMNS="160"),
    )
    os.close(terminal)
    try:
        shown = read_until(controller, process, "Application startup complete")
        imported = import_beside(data_dir, scratch_dir / "turns.jsonl")
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(HANG_GUARD_S)
        os.close(controller)
    lines = shown.splitlines()
    assert not [line for line in lines if line.lstrip().startswith("{")], shown  # no JSON
    assert "\\n" not in shown, shown  # no escaped newlines (alembic's docstrings)
    assert any(re.match(r"\d\d:\d\d:\d\d\s+INFO\s+migrating to 0001: Foundation", line)
               for line in lines), shown  # fmt: skip
    assert "Context impl" not in shown
    # the embedder's settings, once (the pre-flight check said them too, before the app did)
    assert len(re.findall(r"embeddings: provider=hash ", shown)) == 1, shown
    banner = shown[shown.index("gql-memory is serving:") :]
    for name, value in (
        ("GraphiQL", f"http://127.0.0.1:{port}/graphql"),
        ("dashboard", f"http://127.0.0.1:{port}/dashboard/"),
        ("data dir", f"{data_dir} (embedded PostgreSQL)"),
        ("embedder", "hash: lexical, not semantic, for tests (384 dimensions)"),
        ("API keys", "optional: callers on this machine need none"),
    ):
        assert re.search(rf"^  {name} +{re.escape(value)}\s*$", banner, re.M), banner

    # an import beside the running server says it uses that server, and starts none
    assert imported.returncode == 0, imported.stderr
    assert "imported 1 of 1 turn" in imported.stdout
    assert "using the embedded PostgreSQL already running in" in imported.stderr
    assert "starting embedded PostgreSQL" not in imported.stderr
