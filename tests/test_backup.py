"""The "Backup and restore" commands of docs/operations.md, run as written against real
embedded servers.

The commands name root's default data dir: ``DATA=/var/lib/gql-memory`` (the server to back
up) and ``NEW=/var/lib/gql-memory-restored`` (the restore target). The test rewrites exactly
those two assignments to private temporary dirs and changes nothing else; each ```bash block
runs with ``bash -e -o pipefail`` in a scratch working directory (where the dump lands), with
the virtualenv's ``python`` and ``gql-memory`` first on PATH and no PG*, DATABASE_URL or
GQL_MEMORY_* variables but the suite's hash embedder.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from sqlalchemy import text

from gql_memory import AsyncMemoryStore
from gql_memory.config import Settings
from gql_memory.keys import ApiKeyStore
from tests.conftest import ROOT, serving
from tests.processes import embedded_url

SECTION = "## Backup and restore"
README_PATHS = {"DATA": "/var/lib/gql-memory", "NEW": "/var/lib/gql-memory-restored"}


def backup_section() -> str:
    page = (ROOT / "docs" / "operations.md").read_text()
    start = page.index(SECTION)
    end = re.compile(r"^##", re.M).search(page, start + len(SECTION))
    return page[start : end.start() if end else len(page)]


def bash_blocks(section: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", section, re.S)


def with_paths(block: str, paths: dict[str, Path]) -> str:
    """The block with its ``DATA=``/``NEW=`` assignments pointing at ``paths`` instead."""
    for name, path in paths.items():
        assignment = re.compile(rf"^{name}={re.escape(README_PATHS[name])}(?=\s)", re.M)
        block, count = assignment.subn(f"{name}={path}", block)
        assert count == 1, f"the docs block no longer assigns {name}={README_PATHS[name]}"
    return block


def external_dump_line(section: str, backup_block: str) -> str:
    """The one-line DATABASE_URL backup, after the ``BIN=`` line it relies on."""
    (line,) = re.findall(r'`("\$BIN/pg_dump" -Fc -d [^`]*)`', section.replace("\n", " "))
    (bin_line,) = (line for line in backup_block.splitlines() if line.startswith("BIN="))
    return f"{bin_line}\n{line}\n"


def shell_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GQL_MEMORY_", "PG")) and k != "DATABASE_URL"
    }
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["GQL_MEMORY_EMBEDDING_PROVIDER"] = "hash"
    env.update(extra)
    return env


def run_bash(script: str, cwd: Path, **env: str) -> str:
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=cwd,
        env=shell_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"{script}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    return done.stdout


async def test_readme_backup_restores_into_a_fresh_data_dir_that_serves(
    scratch_dir: Path,
) -> None:
    section = backup_section()
    backup, restore = bash_blocks(section)
    source, restored = scratch_dir / "data", scratch_dir / "restored"
    dumps = scratch_dir / "work"
    dumps.mkdir()

    async with AsyncMemoryStore(data_dir=source) as store:
        added = await store.working.add("User prefers dark mode", importance=0.9)
        await store.raw.store("chat-42", "user", "Book a table for two", {"channel": "web"})
        await store.insights.add("The user books restaurants for two", source_ids=[])
        key = await ApiKeyStore(store.memory.db).create("default", "read", name="backup")

        listing = run_bash(with_paths(backup, {"DATA": source}), dumps)
        assert f"{source}/pgdata/.s.PGSQL." in listing
        assert (dumps / "gql-memory.dump").stat().st_size > 0

        external = scratch_dir / "external"
        external.mkdir()
        # the URL as gql_memory spells it (postgresql+asyncpg://), which the line converts
        url = embedded_url(source)
        run_bash(external_dump_line(section, backup), external, DATABASE_URL=url)
        assert (external / "gql-memory.dump").stat().st_size > 0

    run_bash(with_paths(restore, {"NEW": restored}), dumps)

    # The server on the restored dir: requests run as the row-level-security role, so this
    # needs the restored grants and policies and the role's login.
    async with serving(Settings(data_dir=restored)) as live:
        stats = await live.with_key(key.secret).data("{ stats { rawDialogue workingMemory } }")
        assert stats["stats"] == {"rawDialogue": 1, "workingMemory": 1}  # the key still works
        items = await live.data("{ workingMemory { id content } }")
        assert items["workingMemory"] == [
            {"id": str(added.added_id), "content": "User prefers dark mode"}
        ]
        stored = await live.data(
            'mutation { storeRawDialogue(input: {sessionId: "chat-42", speaker: "agent", '
            'content: "Done"}) { id } }'
        )
        assert int(stored["storeRawDialogue"]["id"]) > 1  # the restored sequence continues

    async with AsyncMemoryStore(data_dir=restored) as store:
        page = await store.raw.list(session_id="chat-42")
        assert [turn.content for turn in page.items] == ["Done", "Book a table for two"]
        (hit,) = await store.insights.search("restaurants for two", top_k=1)
        assert hit.insight.content == "The user books restaurants for two"
        async with store.memory.db.read() as conn:
            leakproof = await conn.scalar(
                text("SELECT proleakproof FROM pg_proc WHERE oid = 'ts_match_vq'::regproc")
            )
        assert leakproof  # full-text search keeps its index under row-level security
