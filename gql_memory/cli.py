"""Command line: serve, migrate, reembed, export-schema, export, consolidate, import, mcp,
rules check, keys."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from typer.core import TyperCommand, TyperGroup, TyperOption

# Only what `--help` and an argument error need is imported here: each command imports the
# rest (the database, the GraphQL schema, pydantic's settings) when it runs, so that the help
# and a mistyped option answer at once (tests/test_cli_help.py counts the modules imported).
from gql_memory.errors import ConfigurationError, GqlMemoryError, NotFoundError, ValidationError

if TYPE_CHECKING:
    from gql_memory.config import Settings
    from gql_memory.keys import ApiKey, ApiKeyStore
    from gql_memory.memory.importer import ImportSummary
    from gql_memory.memory.interchange.export import ExportSummary
    from gql_memory.memory.interchange.foreign import ForeignFile
    from gql_memory.memory.interchange.load import LoadSummary

log = logging.getLogger("gql_memory")
T = TypeVar("T")
Progressed = Callable[[int, int], None]


def _without_type_tags(params: list[Any]) -> list[Any]:
    """Typer's help tags every parameter with its type (`<str>`, `<path>`, even
    `--help <bool>`). Show instead what an option takes (its metavar: PORT, DIR) and nothing
    after a flag or an argument, whose name says it."""
    for param in params:
        shown = param.metavar if isinstance(param, TyperOption) and not param.is_flag else None
        param.display_type_rich = lambda ctx, shown=shown: shown
    return params


class Command(TyperCommand):
    """A command whose help has no type tags."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _without_type_tags(super().get_params(ctx))


class Group(TyperGroup):
    """A command group whose help has no type tags."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _without_type_tags(super().get_params(ctx))


def _typer(help: str) -> typer.Typer:
    # markdown: help paragraphs are re-wrapped to the terminal, `code` is shown as code
    return typer.Typer(help=help, cls=Group, rich_markup_mode="markdown")


app = _typer("gql_memory: a memory service for AI agents, served as GraphQL.")
rules_app = _typer("Extraction rules: tool outputs -> working memory.")
app.add_typer(rules_app, name="rules")

DataDirOption = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        metavar="DIR",
        envvar="GQL_MEMORY_DATA_DIR",
        help="Embedded PostgreSQL data directory (used when DATABASE_URL is unset).",
    ),
]


def plural(count: int, noun: str, plural_noun: str | None = None) -> str:
    """`1 session`, `2 sessions` (`plural_noun` where adding an s is wrong)."""
    return f"{count} {noun if count == 1 else plural_noun or noun + 's'}"


async def _migrate(
    settings: Settings, embedded: bool = False, log_embedder: bool = True
) -> tuple[str | None, int, str]:
    """Migrate and check the database (gql_memory.runtime); return its revision, the number
    of active API keys and the embedder in a few words. ``embedded``: the caller started the
    embedded server at the URL. ``log_embedder``: log the embedder's settings line (serve
    does not: its app logs it as it starts)."""
    from gql_memory import runtime
    from gql_memory.db.embedded import allow_role_login
    from gql_memory.db.migrate import current_revision
    from gql_memory.embeddings import describe, summary
    from gql_memory.keys import ApiKeyStore
    from gql_memory.runtime import Purpose

    async with runtime.open(settings, Purpose.MAINTENANCE) as rt:
        if embedded or rt.embedded is not None:
            # the embedded server: requests will log in as the row-level security role
            await allow_role_login(rt.db, settings.database_role)
        if log_embedder:
            log.info(describe(rt.embedder))
        revision = await current_revision(rt.db)
        return revision, await ApiKeyStore(rt.db).count_active(), summary(rt.embedder)


def _prepare_metrics_dir(path: Path) -> None:
    """Multiprocess metrics: a directory without stale files, announced to every worker."""
    from gql_memory.server.metrics import prepare_multiprocess_dir

    prepare_multiprocess_dir(path)
    # prometheus-client reads the variable itself (also when it came from the config file).
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(path)
    log.info("metrics: multiprocess mode, files in %s", path)


@contextmanager
def _progress_bar(label: str, total: int | None, transient: bool) -> Iterator[Progressed]:
    """One task's progress bar on stderr, with the logs, which it prints above itself (stdout
    keeps the summary line alone); yields the callback that moves it."""
    from rich.console import Console
    from rich.progress import Progress

    from gql_memory.server.logs import above_progress

    with (
        Progress(console=Console(stderr=True), transient=transient) as bar,
        above_progress(bar.console),
    ):
        task = bar.add_task(label, total=total)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield progress


def _exit_cleanly(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def _fail(message: str) -> NoReturn:
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code=2)


def _settings(**overrides: Any) -> Settings:
    """The settings (environment, config file, then the command's options); a bad config
    file or value ends the command with one line naming it, and status 2."""
    from pydantic import ValidationError as PydanticValidationError

    from gql_memory.config import Settings, invalid_settings_message

    try:
        settings = Settings()
    except ConfigurationError as exc:
        _fail(str(exc))
    except PydanticValidationError as exc:
        _fail(invalid_settings_message(exc))
    try:
        return settings.with_overrides(**overrides)
    except PydanticValidationError as exc:
        _fail(invalid_settings_message(exc, from_command_line=True))


@app.command(cls=Command)
def serve(
    host: Annotated[
        str | None, typer.Option(metavar="ADDRESS", help="Address to bind (default 127.0.0.1).")
    ] = None,
    port: Annotated[int | None, typer.Option(metavar="PORT", help="Port (default 8000).")] = None,
    workers: Annotated[
        int | None, typer.Option(metavar="N", help="Worker processes (default 1).")
    ] = None,
    data_dir: DataDirOption = None,
    insecure: Annotated[
        bool,
        typer.Option(
            "--insecure",
            help="Allow serving a non-loopback address without required API keys.",
        ),
    ] = False,
) -> None:
    """Start PostgreSQL if needed, migrate, and serve GraphQL (GraphiQL at /graphql)."""
    import uvicorn

    from gql_memory import runtime
    from gql_memory.db.embedded import login_url
    from gql_memory.keys import check_exposure, is_loopback
    from gql_memory.memory.extraction.rules import rules_for
    from gql_memory.server.connections import bounded_http_protocol
    from gql_memory.server.logs import configure_logging, log_config
    from gql_memory.server.startup import banner, check_embedding_server, refuse_a_port_in_use

    settings = _settings(
        host=host, port=port, workers=workers, data_dir=data_dir, insecure=insecure or None
    )
    configure_logging(settings.log_level, settings.log_format)
    # uvicorn drains on SIGTERM, then re-raises it; by default that would kill this process
    # before the embedded PostgreSQL is stopped. Exit through the `with` below instead.
    signal.signal(signal.SIGTERM, _exit_cleanly)
    started = time.perf_counter()
    try:
        rules_for(settings)  # a bad extraction rule stops here, before PostgreSQL starts
        check_exposure(settings)  # before starting anything; the key count is checked below
        refuse_a_port_in_use(settings.host, settings.port)
        asyncio.run(check_embedding_server(settings))  # a wrong URL stops here too
        # PostgreSQL stays up while uvicorn's workers (other processes) use it; this process
        # supervises it (restarts it when it dies), whatever the number of workers
        with (
            runtime.database(settings) as (url, embedded),
            runtime.supervised(embedded, settings) as embedded_state,
        ):
            revision, active_keys, embedder = asyncio.run(
                _migrate(
                    settings.with_overrides(database_url=url),
                    embedded is not None,
                    log_embedder=False,  # the app's startup logs it, once per worker
                )
            )
            mode = check_exposure(settings, active_keys)
            log.info("database at migration %s (%.2fs)", revision, time.perf_counter() - started)
            if mode == "optional" and not is_loopback(settings.host):
                log.warning("serving %s WITHOUT required API keys (--insecure)", settings.host)
            # Workers are separate processes: they learn the decisions through the environment.
            os.environ["DATABASE_URL"] = url
            if settings.database_url is None and settings.app_database_url is None:
                # the embedded server: requests log in as the row-level security role
                os.environ["GQL_MEMORY_APP_DATABASE_URL"] = login_url(url, settings.database_role)
            if settings.prometheus_multiproc_dir is not None:
                _prepare_metrics_dir(settings.prometheus_multiproc_dir)
            os.environ["GQL_MEMORY_AUTH"] = mode
            if embedded_state is not None:  # what /readyz and /healthz read in every worker
                os.environ["GQL_MEMORY_EMBEDDED_STATE_FILE"] = str(embedded_state.path)
            os.environ["GQL_MEMORY_INSECURE"] = "true" if settings.insecure else "false"
            data = embedded.data_dir if embedded is not None else None
            typer.echo(banner(settings, mode, data, embedder))
            uvicorn.run(
                "gql_memory.server.app:create_app",
                factory=True,
                host=settings.host,
                port=settings.port,
                workers=settings.workers,
                log_level=settings.log_level.lower(),
                log_config=log_config(settings.log_level, settings.log_format),
                access_log=False,  # gql_memory.access logs each request, with its request id
                timeout_graceful_shutdown=settings.shutdown_timeout_s,
                # slow or idle clients: a header deadline and a connection cap
                http=bounded_http_protocol(settings),
                timeout_keep_alive=settings.keep_alive_timeout_s,
            )
    except GqlMemoryError as exc:
        _fail(str(exc))


@app.command(cls=Command)
def migrate(data_dir: DataDirOption = None) -> None:
    """Apply all database migrations (idempotent)."""
    from gql_memory.server.logs import configure_logging

    settings = _settings(data_dir=data_dir)
    configure_logging(settings.log_level, settings.log_format)
    try:
        revision, _, _ = asyncio.run(_migrate(settings))
    except GqlMemoryError as exc:
        _fail(str(exc))
    typer.echo(f"database is at migration {revision}")


@app.command(cls=Command)
def distribute() -> None:
    """Distribute the migrated database of a Citus coordinator by namespace.

    DATABASE_URL names the coordinator, as its owner; stop every server first. Global tables
    become reference tables, tenant tables are distributed by namespace and co-located, and
    the workers get the functions, the role's login and the namespace scoping
    (docs/scaling.md, step 5). A second run changes nothing and says so; on a database
    without Citus or without worker nodes it refuses and changes nothing.
    """
    from gql_memory import runtime
    from gql_memory.db.distribute import distribute as distribute_database
    from gql_memory.runtime import Purpose
    from gql_memory.server.logs import configure_logging

    settings = _settings()
    configure_logging(settings.log_level, settings.log_format)
    if not settings.database_url:
        _fail("set DATABASE_URL to the Citus coordinator (the embedded server has no Citus)")

    async def run() -> list[str]:
        async with runtime.open(
            settings, Purpose.MAINTENANCE, migrate=False, check_embeddings=False
        ) as rt:
            done = await distribute_database(rt.db, settings.database_role)
            return done.changes

    try:
        changes = asyncio.run(run())
    except GqlMemoryError as exc:
        _fail(str(exc))
    for change in changes:
        typer.echo(change)
    typer.echo(
        f"distributed: {plural(len(changes), 'change')}"
        if changes
        else "already distributed: nothing to change"
    )


@app.command(cls=Command)
def reembed(
    data_dir: DataDirOption = None,
    batch_size: Annotated[
        int, typer.Option(metavar="N", help="Texts per embedding request.")
    ] = 256,
    restart: Annotated[
        bool,
        typer.Option(
            "--restart",
            help="Discard the vectors of an interrupted re-embed toward another provider, "
            "model or dimension and start over with the configured one.",
        ),
    ] = False,
    status: Annotated[
        bool,
        typer.Option(
            "--status",
            help="Show the re-embed in progress and the rows waiting for their vectors; "
            "change nothing.",
        ),
    ] = False,
    missing: Annotated[
        bool,
        typer.Option(
            "--missing",
            help="Only embed the rows stored while the embedder was down (waiting for their "
            "vectors), with the database's own provider; runs while servers are up.",
        ),
    ] = False,
) -> None:
    """Re-embed every insight, episode and raw turn with the configured provider.

    Use it after switching embedding provider, model or dimension. Every server and library
    user must be stopped: it refuses to run while one is connected, and servers refuse to
    start until it has finished. An interrupted run resumes when run again.

    With --missing, only the rows stored while the embedder was down get their vectors
    (servers do this in the background too, once the embedder answers again).
    """
    from rich.console import Console
    from rich.progress import Progress

    from gql_memory import runtime
    from gql_memory.memory.embedding_config import reembed as reembed_all
    from gql_memory.memory.embedding_config import reembed_status
    from gql_memory.memory.turn_embedding import TurnRecipe
    from gql_memory.memory.waiting import embed_waiting, waiting_counts
    from gql_memory.runtime import Purpose
    from gql_memory.server.logs import above_progress, configure_logging

    settings = _settings(data_dir=data_dir)
    configure_logging(settings.log_level, settings.log_format)

    async def run() -> dict[str, int]:
        # migrated, but the stored vectors are not checked against the provider: they are
        # what this command changes (except with --missing: it adds to them)
        async with runtime.open(
            settings, Purpose.MAINTENANCE, check_embeddings=missing and not status
        ) as rt:
            db, embedder = rt.db, rt.embedder
            if status:
                found = await reembed_status(db, settings.embed_raw_dialogue)
                waiting = await waiting_counts(db)
                typer.echo("\n".join(found.lines()))
                left = sum(waiting.values())
                hint = " (`gql-memory reembed --missing` embeds them)" if left else ""
                typer.echo(f"{plural(left, 'row')} waiting for their vectors{hint}")
                return {}
            if missing:
                total = sum((await waiting_counts(db)).values())
                with Progress(console=Console(stderr=True)) as bar, above_progress(bar.console):
                    task = bar.add_task("waiting rows", total=total)
                    embedded: dict[str, int] = {}

                    def advanced(table: str, done: int) -> None:
                        embedded[table] = done
                        bar.update(task, completed=sum(embedded.values()))

                    return await embed_waiting(
                        db,
                        embedder,
                        TurnRecipe.from_settings(settings),
                        batch_size=batch_size,
                        progress=advanced,
                    )
            with Progress(console=Console(stderr=True)) as bar, above_progress(bar.console):
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
                    turns=TurnRecipe.from_settings(settings),
                    restart=restart,
                    exclusive=True,
                    progress=progress,
                )

    try:
        counts = asyncio.run(run())
    except GqlMemoryError as exc:
        _fail(str(exc))
    if missing and not status:
        summary = ", ".join(f"{table}: {n}" for table, n in counts.items())
        typer.echo(f"embedded the rows that waited for their vectors: {summary}")
    elif not status:
        summary = ", ".join(f"{table}: {n}" for table, n in counts.items())
        typer.echo(f"re-embedded {summary}")


@app.command("export-schema", cls=Command)
def export_schema(
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", metavar="FILE", help="Write to this file, not stdout."),
    ] = None,
) -> None:
    """Print the GraphQL schema (SDL); `--output schema.graphql` rewrites the checked-in file."""
    from gql_memory.api.schema import export_sdl

    _settings()  # the schema reads them: a bad config is one line here, not a traceback
    sdl = export_sdl()
    if output is None:
        typer.echo(sdl, nl=False)
    else:
        output.write_text(sdl)
        typer.echo(f"wrote {output}", err=True)


@app.command(cls=Command)
def export(
    namespace: Annotated[str, typer.Option(metavar="NAME", help="Namespace to export.")],
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", metavar="FILE", help="Write to this file, not stdout."),
    ] = None,
    with_vectors: Annotated[
        bool,
        typer.Option(
            "--with-vectors",
            help="Also write every vector and the embedding signature they were made with.",
        ),
    ] = False,
    data_dir: DataDirOption = None,
) -> None:
    """Export everything a namespace holds as versioned JSONL (docs/interchange.md).

    Raw dialogue, working memory with its sessions and the stale archive, insights, episodes
    and the graph, with validity and supersession; `gql-memory import FILE` reads it back.
    One consistent snapshot, streamed: memory stays constant at any size.
    """

    from gql_memory import __version__, runtime
    from gql_memory.memory.interchange.export import export_namespace
    from gql_memory.memory.validation import require_namespace
    from gql_memory.runtime import Purpose
    from gql_memory.server.logs import configure_logging

    settings = _settings(data_dir=data_dir)
    configure_logging(settings.log_level, settings.log_format)
    try:
        require_namespace(namespace)
    except GqlMemoryError as exc:
        _fail(str(exc))
    # a file is written beside its name and renamed once complete: never half an export
    partial = None if output is None else output.with_name(output.name + ".partial")

    async def run() -> ExportSummary:
        async with runtime.open(settings, Purpose.MAINTENANCE, check_embeddings=False) as rt:
            with _progress_bar(f"exporting {namespace}", None, transient=True) as progress:
                if partial is None:
                    return await export_namespace(
                        rt.db,
                        namespace,
                        sys.stdout,
                        with_vectors=with_vectors,
                        producer=__version__,
                        progress=progress,
                    )
                with partial.open("w", encoding="utf-8", newline="\n") as out:
                    summary = await export_namespace(
                        rt.db,
                        namespace,
                        out,
                        with_vectors=with_vectors,
                        producer=__version__,
                        progress=progress,
                    )
                    out.flush()
                    os.fsync(out.fileno())  # on disk before the rename makes it the file
                    return summary

    try:
        summary = asyncio.run(run())
        if partial is not None and output is not None:
            partial.replace(output)
    except (GqlMemoryError, OSError) as exc:
        _fail(str(exc) if isinstance(exc, GqlMemoryError) else f"cannot write {output}: {exc}")
    finally:  # whatever ended it (an error, Ctrl-C): no partial file stays behind
        if partial is not None:
            partial.unlink(missing_ok=True)
    counts = ", ".join(f"{kind}: {n}" for kind, n in summary.counts.items())
    vectors = " with vectors" if summary.with_vectors else ""
    typer.echo(
        f"exported {plural(summary.rows, 'row')} of namespace '{namespace}'{vectors} "
        f"to {output or 'stdout'} ({counts})",
        err=output is None,
    )


@app.command(cls=Command)
def consolidate(
    namespace: Annotated[
        str, typer.Option(metavar="NAME", help="Namespace to consolidate.")
    ] = "default",
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what it would do; change nothing.")
    ] = False,
    undo: Annotated[
        int | None,
        typer.Option(metavar="ACTION", help="Undo this journaled action instead of a pass."),
    ] = None,
    history: Annotated[
        bool, typer.Option("--history", help="List the journal (newest first) instead.")
    ] = False,
    data_dir: DataDirOption = None,
) -> None:
    """Consolidate a namespace: merge duplicate insights, supersede changed facts, make
    near-duplicate automatic entities aliases, digest quiet sessions (docs/consolidation.md).

    Every action is journaled: `--history` lists them, `--undo ACTION` restores what stood
    before one. A second pass changes nothing. No model is needed.
    """

    from gql_memory import runtime
    from gql_memory.memory import Memory
    from gql_memory.memory.validation import require_namespace
    from gql_memory.runtime import Purpose
    from gql_memory.server.logs import configure_logging

    settings = _settings(data_dir=data_dir)
    configure_logging(settings.log_level, settings.log_format)
    try:
        require_namespace(namespace)
    except GqlMemoryError as exc:
        _fail(str(exc))

    async def run() -> list[str]:
        async with runtime.open(settings, Purpose.MAINTENANCE) as rt:
            memory = Memory(rt.db, settings, namespace, rt.embedder)
            if undo is not None:
                result = await memory.consolidation.undo(undo)
                lines = [
                    f"undid action {undo} ({result.action.kind.value}): {result.action.reason}"
                ]
                lines += [f"  left {i} as it is: {why}" for i, why in result.left.items()]
                return lines
            if history:
                page = await memory.consolidation.history(first=settings.max_page_size)
                return [
                    f"{a.id} {a.created_at:%Y-%m-%d %H:%M} {a.kind.value}"
                    f"{' (undone)' if a.undone else ''}: {a.reason}"
                    for a in page.items
                ] or ["the journal is empty"]
            report = await memory.consolidation.run(dry_run=dry_run)
            verb = "would take" if dry_run else "took"
            lines = [
                f"{'-' if a.id is None else a.id} {a.kind.value}: {a.reason}"
                for a in report.actions
            ]
            lines.append(
                f"namespace '{namespace}': {verb} {plural(len(report.actions), 'action')} "
                f"({plural(report.insights_examined, 'insight')}, "
                f"{plural(report.entities_examined, 'entity', 'entities')}, "
                f"{plural(report.sessions_examined, 'quiet session')} examined)"
            )
            return lines

    try:
        lines = asyncio.run(run())
    except GqlMemoryError as exc:
        _fail(str(exc))
    for line in lines:
        typer.echo(line)


@app.command("import", cls=Command)
def import_transcript(
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE",
            help="An export (by its header), or a transcript: JSONL, a JSON list, or LoCoMo JSON.",
        ),
    ],
    namespace: Annotated[
        str, typer.Option(metavar="NAME", help="Namespace to import into.")
    ] = "default",
    session_prefix: Annotated[
        str, typer.Option(metavar="PREFIX", help="Prepended to every session id (e.g. 'import-').")
    ] = "",
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            metavar="FORMAT",
            help="auto, export, jsonl, json, locomo, mem0, mcp-memory or letta (auto: by content).",
        ),
    ] = "auto",
    batch_size: Annotated[
        int, typer.Option(metavar="N", help="Turns (of an export: records) per batch.")
    ] = 500,  # gql_memory.config.IMPORT_BATCH_SIZE (not imported for --help; a test compares)
    replace: Annotated[
        bool,
        typer.Option("--replace", help="Export only: erase the namespace first (atomically)."),
    ] = False,
    merge: Annotated[
        bool,
        typer.Option(
            "--merge",
            help="Export only: add alongside the namespace's data; rows it holds are not "
            "added again.",
        ),
    ] = False,
    data_dir: DataDirOption = None,
) -> None:
    """Import an export, or a transcript into raw dialogue.

    An export (`gql-memory export`) is read back exactly, in one transaction: a namespace
    that holds data is refused unless `--replace` or `--merge`. A transcript is batched and
    idempotent (re-runs skip stored turns). Also memories of mem0, the reference MCP memory
    server and Letta (docs/interchange.md).
    """
    from gql_memory.memory.interchange.format import sniff

    _settings(data_dir=data_dir)  # a bad configuration is the first error, as everywhere
    if not file.is_file():
        _fail(f"no such file: {file}")
    if fmt == "export" or (fmt == "auto" and sniff(file)):
        _import_export(file, namespace, batch_size, replace, merge, data_dir)
        return
    if replace or merge:
        _fail("--replace and --merge apply to an export file (made by `gql-memory export`)")

    from gql_memory.memory.importer import TranscriptImporter, read_transcript
    from gql_memory.memory.interchange.foreign import read_if_foreign
    from gql_memory.memory.validation import require_namespace
    from gql_memory.server.logs import configure_logging
    from gql_memory.store import AsyncMemoryStore

    settings = _settings(data_dir=data_dir)
    configure_logging(settings.log_level, settings.log_format)
    try:  # the whole file, before any database is started: a bad one writes nothing
        require_namespace(namespace)
        foreign = read_if_foreign(file, fmt, namespace, session_prefix)
        if foreign is None:
            detected, turns = read_transcript(file, fmt, session_prefix)
    except GqlMemoryError as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"cannot read {file}: {exc.strerror}")
    if foreign is not None:  # mem0, the MCP memory server, Letta (gql_memory/memory/interchange)
        typer.echo(_import_foreign(foreign, settings, namespace))
        return

    async def run() -> ImportSummary:
        async with AsyncMemoryStore(settings=settings, namespace=namespace) as store:
            importer = TranscriptImporter(store.raw, batch_size)
            with _progress_bar(f"importing {file.name}", len(turns), transient=False) as progress:
                return await importer.run(detected, turns, progress)

    try:
        summary = asyncio.run(run())
    except GqlMemoryError as exc:
        _fail(str(exc))
    typer.echo(_import_summary(summary, namespace))


def _import_export(
    file: Path, namespace: str, batch_size: int, replace: bool, merge: bool, data_dir: Path | None
) -> None:
    """`import` of an export file (gql_memory.memory.interchange.load)."""

    from gql_memory import runtime
    from gql_memory.memory.interchange.load import Mode, count_records, load_export
    from gql_memory.memory.turn_embedding import TurnRecipe
    from gql_memory.memory.validation import require_namespace
    from gql_memory.memory.waiting import embed_waiting
    from gql_memory.runtime import Purpose
    from gql_memory.server.logs import configure_logging

    if replace and merge:
        _fail("--replace and --merge exclude each other")
    if not 1 <= batch_size <= 10_000:
        _fail("batch size must be between 1 and 10000")
    mode = Mode.REPLACE if replace else Mode.MERGE if merge else Mode.REFUSE
    settings = _settings(data_dir=data_dir)
    configure_logging(settings.log_level, settings.log_format)
    try:  # every line, before any database is started: a bad file writes nothing
        require_namespace(namespace)
        count_records(file)
    except GqlMemoryError as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"cannot read {file}: {exc.strerror}")

    async def run() -> tuple[LoadSummary, str]:
        async with runtime.open(settings, Purpose.MAINTENANCE) as rt:
            with _progress_bar(f"importing {file.name}", None, transient=True) as progress:
                summary = await load_export(
                    rt.db, settings, namespace, file, mode, batch_size=batch_size, progress=progress
                )
            if not summary.waiting:
                return summary, ""
            try:  # the rows without usable vectors: embedded now, as the backfill would
                embedded = await embed_waiting(
                    rt.db, rt.embedder, TurnRecipe.from_settings(settings)
                )
            except GqlMemoryError as exc:
                return summary, (
                    f"; left waiting ({exc}): a running server embeds them, or "
                    "`gql-memory reembed --missing`"
                )
            return summary, f"; embedded {plural(sum(embedded.values()), 'row')} anew"

    try:
        summary, embedded = asyncio.run(run())
    except GqlMemoryError as exc:
        _fail(str(exc))
    added = ", ".join(f"{kind}: {n}" for kind, n in summary.added.items())
    read = sum(summary.read.values())
    how = " (replacing what it held)" if summary.replaced else " (merged)" if merge else ""
    typer.echo(
        f"imported {sum(summary.added.values())} of {plural(read, 'record')} into namespace "
        f"'{namespace}'{how} from the export {file.name} ({added}), {summary.seconds:.1f} s"
    )
    if summary.vector_note:
        typer.echo(summary.vector_note + embedded)


def _import_foreign(foreign: ForeignFile, settings: Settings, namespace: str) -> str:
    from gql_memory.memory.interchange.foreign import import_foreign
    from gql_memory.store import AsyncMemoryStore

    async def run() -> str:
        async with AsyncMemoryStore(settings=settings, namespace=namespace) as store:
            return (await import_foreign(store.memory, foreign)).describe(namespace)

    try:
        return asyncio.run(run())
    except GqlMemoryError as exc:
        _fail(str(exc))


def _import_summary(summary: ImportSummary, namespace: str) -> str:
    return (
        f"imported {summary.stored} of {plural(summary.read, 'turn')} ({summary.skipped} "
        f"already present) in {plural(summary.sessions, 'session')} of namespace "
        f"'{namespace}' from {summary.format.value} in "
        f"{plural(summary.batches, 'batch', 'batches')}, {summary.seconds:.1f} s"
    )


@app.command(cls=Command)
def mcp(
    namespace: Annotated[
        str, typer.Option(metavar="NAME", help="Namespace the agent's memory lives in.")
    ] = "default",
    data_dir: DataDirOption = None,
) -> None:
    """Serve the Model Context Protocol over stdio (tools and memory:// resources)."""
    from gql_memory.mcp_server import run_stdio
    from gql_memory.memory.validation import require_namespace
    from gql_memory.server.logs import configure_logging

    settings = _settings(data_dir=data_dir)
    try:
        require_namespace(namespace)
    except GqlMemoryError as exc:
        _fail(str(exc))
    # stdout carries the protocol: logs go to stderr only, formatted as the server's.
    configure_logging(settings.log_level, settings.log_format)
    try:
        run_stdio(settings, namespace)
    except GqlMemoryError as exc:
        _fail(str(exc))


@rules_app.command("check", cls=Command)
def rules_check(
    file: Annotated[
        Path,
        typer.Argument(metavar="FILE", help="TOML or YAML file with an `extraction_rules` list."),
    ],
) -> None:
    """Validate a rule file without starting anything; exit 2 naming the first bad rule."""
    from gql_memory.memory.extraction.rules import load_rule_file

    try:
        rules = load_rule_file(file)
    except ConfigurationError as exc:
        _fail(str(exc))
    typer.echo(f"{file}: {plural(len(rules), 'extraction rule')} OK (first match wins)")
    for rule in rules:
        content = rule.content_pattern if rule.content_pattern is not None else "(any output)"
        path = f"path {rule.path_pattern!r}, " if rule.path_pattern is not None else ""
        typer.echo(
            f"  {rule.id}: tool {rule.tool_pattern!r}, {path}content {content!r}, "
            f"attention {rule.attention}, {rule.summarizer}"
        )


# --- keys ------------------------------------------------------------------------------------

keys_app = _typer("Create, list and revoke API keys (stored hashed, shown once).")
app.add_typer(keys_app, name="keys")


def _with_key_store(data_dir: Path | None, action: Callable[[ApiKeyStore], Awaitable[T]]) -> T:
    """Run ``action`` against the database (DATABASE_URL or the embedded one), migrated."""
    from gql_memory import runtime
    from gql_memory.keys import ApiKeyStore
    from gql_memory.runtime import Purpose
    from gql_memory.server.logs import configure_logging

    settings = _settings(data_dir=data_dir)
    # Quiet: the output of these commands is for people and scripts, not a log.
    configure_logging("WARNING", "text")

    async def run() -> T:
        async with runtime.open(settings, Purpose.MAINTENANCE, check_embeddings=False) as rt:
            return await action(ApiKeyStore(rt.db))

    try:
        return asyncio.run(run())
    except (ConfigurationError, ValidationError, NotFoundError) as exc:
        _fail(str(exc))
        raise  # unreachable: _fail exits


@keys_app.command("create", cls=Command)
def keys_create(
    namespace: Annotated[
        str, typer.Option(metavar="NAME", help="Namespace (tenant) the key is bound to.")
    ],
    scopes: Annotated[
        str, typer.Option(metavar="SCOPES", help="Comma-separated: read, write, admin.")
    ],
    name: Annotated[
        str | None, typer.Option(metavar="LABEL", help="A label to recognise the key by.")
    ] = None,
    data_dir: DataDirOption = None,
) -> None:
    """Create a key. It is printed once, alone on the last line; only its hash is stored."""
    from gql_memory.memory.validation import require_namespace

    try:  # before any database is started, as import and mcp do
        require_namespace(namespace)
    except ValidationError as exc:
        _fail(str(exc))
    created = _with_key_store(data_dir, lambda store: store.create(namespace, scopes, name))
    key = created.key
    typer.echo(
        f"created API key {key.id} for namespace {key.namespace!r} with scopes "
        f"{_scopes(key)}; it is shown only now (send it as 'Authorization: Bearer <key>'):"
    )
    typer.echo(created.secret)


@keys_app.command("list", cls=Command)
def keys_list(data_dir: DataDirOption = None) -> None:
    """List keys (never their secrets): id, namespace, name, scopes, prefix, state."""
    keys = _with_key_store(data_dir, lambda store: store.list())
    if not keys:
        typer.echo("no API keys")
        return
    typer.echo(f"{'id':>5}  {'namespace':<20} {'name':<20} {'scopes':<17} {'prefix':<14} state")
    for key in keys:
        state = f"revoked {key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else "active"
        typer.echo(
            f"{key.id:>5}  {key.namespace:<20} {(key.name or '-'):<20} {_scopes(key):<17} "
            f"{key.prefix + '…':<14} {state} (created {key.created_at:%Y-%m-%d %H:%M})"
        )


@keys_app.command("revoke", cls=Command)
def keys_revoke(
    key_id: Annotated[int, typer.Argument(metavar="ID", help="Id shown by `keys list`.")],
    data_dir: DataDirOption = None,
) -> None:
    """Revoke a key; running servers refuse it within GQL_MEMORY_API_KEY_CACHE_TTL_S (5 s)."""
    key = _with_key_store(data_dir, lambda store: store.revoke(key_id))
    typer.echo(f"revoked API key {key.id} (namespace {key.namespace!r})")


def _scopes(key: ApiKey) -> str:
    from gql_memory.keys import Scope

    return ",".join(s.value for s in Scope if s in key.scopes)


def main() -> None:
    app()
