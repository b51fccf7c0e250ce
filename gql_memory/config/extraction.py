"""The extraction pipeline (SPEC §3.8; seed 002 ADR-004/005/006): how tool outputs are
summarized, the limits of rules, and the redaction gate's calibration."""

from __future__ import annotations

from typing import Any

from pydantic import Field

# firstLast500 keeps this many characters from each end of an output.
FIRST_LAST_CHARS = 500
# stdoutSummary keeps this many lines from the head and from the tail of stdout ...
STDOUT_HEAD_LINES = 20
STDOUT_TAIL_LINES = 20
# ... each cut to at most this many characters.
STDOUT_LINE_CHARS = 200
# matchCountSummary names at most this many files (most matches first) and quotes this many
# matching lines, so that a 5,000-match grep still becomes a short item.
MATCH_SUMMARY_FILES = 20
MATCH_SUMMARY_SAMPLES = 5
# Rule patterns longer than this are refused at startup (a rule is a filter, not a program).
MAX_RULE_PATTERN_CHARS = 2000
# Tool names are identifiers such as "Read" or "mcp__github__search"; longer input is refused.
MAX_TOOL_NAME_CHARS = 255
# Redaction gate (ADR-005): what replaces a secret, and the generic-token heuristic after the
# calibration (>= 40 characters, not pure hex / git SHA / UUID, and random-looking).
REDACTION_MARKER = "[REDACTED]"
GENERIC_TOKEN_MIN_CHARS = 40
# A generic token is random (a secret) when, of its letters and digits (at least this many,
# long hex digests left out) ...
RANDOM_PART_MIN_CHARS = 16
# ... less than this share sits in words that read like words (identifiers and paths: 80%+;
# random base62/base64 keys: 20-30%, at most ~78% in 20,000 random 40-character samples) ...
RANDOM_TOKEN_MAX_WORDY_SHARE = 0.8
# ... and they carry at least this much Shannon entropy (bits per character; a random
# 40-character key has 4-5, a run like "bbbbbbbb..." 0).
RANDOM_TOKEN_MIN_ENTROPY_BITS = 3.0
# Only this many characters of a (possibly huge) candidate token are scored.
RANDOM_TOKEN_SAMPLE_CHARS = 256


class ExtractionSettings:
    """Settings of extraction and redaction (part of ``Settings``)."""

    extraction: bool = Field(
        default=True,
        description="ADR-004's rollback switch: off, ingested tool outputs are not stored "
        "(the reply says so); rules are still validated at startup.",
    )
    extraction_rules: list[Any] | None = Field(
        default=None,
        description="Extraction rules {id, toolPattern, pathPattern, contentPattern, attention, "
        "summarizer} "
        "in priority order (first match wins); unset = the built-in defaults "
        "(gql_memory.memory.extraction.rules.DEFAULT_RULES). Validated at startup.",
    )
    extraction_max_redacted_fraction: float = Field(
        default=0.9,
        ge=0.0,
        le=1.0,
        description="A summary with more than this fraction redacted is not stored at all.",
    )
    extraction_scan_chars: int = Field(
        default=1024 * 1024,
        ge=1000,
        description="Summarizers read at most this many characters of an output (bounds the "
        "work a huge output can cause).",
    )
    redact_insights: bool = Field(
        default=False,
        description="Apply the redaction gate to insight content and metadata before it is "
        "embedded and stored.",
    )
    redact_raw_dialogue: bool = Field(
        default=False,
        description="Apply the redaction gate to raw dialogue content and metadata before it "
        "is stored. Off by default: raw dialogue is the verbatim transcript.",
    )
