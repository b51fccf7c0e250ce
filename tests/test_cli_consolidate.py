"""`gql-memory consolidate`: a pass, a dry run, the journal and undo, in process."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from typer.testing import CliRunner

from gql_memory.cli import app
from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.memory import Memory
from gql_memory.memory.insights import InsightInput


async def run(database_url: str, *args: str) -> tuple[int, str, str]:
    """The command in a thread of its own (it runs its own event loop)."""
    return await asyncio.to_thread(_run, database_url, *args)


def _run(database_url: str, *args: str) -> tuple[int, str, str]:
    env = {"DATABASE_URL": database_url, "GQL_MEMORY_EMBEDDING_PROVIDER": "hash"}
    result = CliRunner().invoke(app, ["consolidate", *args], env=env)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


async def test_consolidate_dry_run_pass_history_and_undo(
    db: Database, settings: Settings, database_url: str
) -> None:
    memory = Memory(db, settings, "cli-consolidate")
    start = datetime.now(UTC) - timedelta(days=30)
    await memory.insights.add_many(
        [
            InsightInput("Carol lives in Berlin.", valid_from=start),
            InsightInput("Carol moved to Munich.", valid_from=start + timedelta(days=3)),
        ]
    )
    ns = ("--namespace", "cli-consolidate")
    code, out, err = await run(database_url, *ns, "--dry-run")
    assert code == 0, err
    assert "- supersede:" in out and "would take 1 action" in out
    code, out, err = await run(database_url, *ns)
    assert code == 0, err
    assert "took 1 action" in out and "residence to 'munich'" in out
    action = out.split()[0]
    code, out, err = await run(database_url, *ns, "--history")
    assert code == 0 and out.startswith(action) and "supersede" in out
    code, out, err = await run(database_url, *ns, "--undo", action)
    assert code == 0 and f"undid action {action} (supersede)" in out
    code, out, err = await run(database_url, *ns, "--undo", action)
    assert code != 0 and "already undone" in err and len(err.strip().splitlines()) == 1
