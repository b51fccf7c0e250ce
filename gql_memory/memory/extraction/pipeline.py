"""The extraction pipeline (SPEC §3.8): agent tool outputs become working-memory items.

ingest = first matching rule -> its summarizer -> the redaction gate -> working memory, with
the rule's attention as importance and the provenance (rule, summarizer, redactions per
family, original length) stored with the item. Nothing unredacted leaves this module: not
to the database, not to a log line, not into an error message.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gql_memory.config import MAX_TOOL_NAME_CHARS, Settings
from gql_memory.errors import ValidationError
from gql_memory.memory.extraction.redaction import Redaction, redact, redact_json
from gql_memory.memory.extraction.rule import ExtractionRule
from gql_memory.memory.extraction.rules import first_match, output_path
from gql_memory.memory.extraction.summarizers import summarize
from gql_memory.memory.offload import run_cpu
from gql_memory.memory.validation import (
    require_json_object,
    require_session_id,
    require_text,
)
from gql_memory.memory.working.working_memory import (
    DEFAULT_SESSION,
    WorkingMemory,
    WorkingMemoryResult,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IngestResult:
    """What happened to one tool output: stored or not, why, and with which provenance."""

    stored: bool
    reason: str
    rule_id: str | None = None
    summarizer: str | None = None
    redaction_applied: bool = False
    provenance: dict[str, Any] | None = None
    working_memory: WorkingMemoryResult | None = None


def require_output(value: Any) -> str:
    """A non-empty output; NUL and lone surrogates (binary reads) become U+FFFD, not errors."""
    if not isinstance(value, str):
        raise ValidationError("output is required")
    if not value.strip():
        raise ValidationError("output must not be empty")
    if "\x00" in value:
        value = value.replace("\x00", "\ufffd")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = value.encode("utf-8", "replace").decode("utf-8")
    return value


class ExtractionPipeline:
    """Feeds tool outputs of one namespace into its working memory."""

    def __init__(
        self, working: WorkingMemory, settings: Settings, rules: Sequence[ExtractionRule]
    ) -> None:
        self.working = working
        self.settings = settings
        self.rules = tuple(rules)

    def _summarized(
        self, tool_name: str, output: str, path: str | None
    ) -> tuple[ExtractionRule | None, Redaction | None]:
        """The first matching rule and its redacted summary of the output (or None, None)."""
        rule = first_match(self.rules, tool_name, output, path)
        if rule is None:
            return None, None
        scan_chars = self.settings.extraction_scan_chars
        return rule, redact(summarize(rule.summarizer, output, scan_chars))

    async def ingest(
        self,
        tool_name: str,
        output: str,
        session_id: str = DEFAULT_SESSION,
        metadata: dict[str, Any] | None = None,
    ) -> IngestResult:
        """Match, summarize, redact and store one tool output (or say why it was not stored)."""
        tool_name = require_text(tool_name, "toolName", max_length=MAX_TOOL_NAME_CHARS)
        output = require_output(output)
        session_id = require_session_id(session_id)
        metadata = require_json_object(metadata, "metadata")
        if not self.settings.extraction:  # ADR-004's rollback switch: inserts stop
            return IngestResult(
                stored=False,
                reason="extraction is switched off (GQL_MEMORY_EXTRACTION=false): "
                "nothing was stored",
            )
        tool_redaction = redact(tool_name)
        safe_tool = tool_redaction.text

        # matching, summarizing and redacting are linear in the output: a large one runs
        # in a worker thread
        path = output_path(output, metadata)
        rule, summary = await run_cpu(len(output), self._summarized, tool_name, output, path)
        if rule is None or summary is None:
            log.debug("tool output (%d chars) matched no extraction rule", len(output))
            return IngestResult(
                stored=False, reason=f"no extraction rule matched tool {safe_tool!r}"
            )

        counts = Counter(summary.counts)
        provenance: dict[str, Any] = {
            "source": "tool_output",
            "tool_name": safe_tool,
            "rule_id": rule.id,
            "summarizer": rule.summarizer,
            "attention": rule.attention,
            "original_length": len(output),
            "summary_length": len(summary.text),
            "redacted_fraction": summary.redacted_fraction,
        }
        if metadata is not None:
            provenance["metadata"], metadata_counts = redact_json(metadata)
            counts.update(metadata_counts)
        counts.update(tool_redaction.counts)
        provenance["redaction_applied"] = bool(counts)
        provenance["redaction_counts"] = dict(sorted(counts.items()))

        limit = self.settings.extraction_max_redacted_fraction
        if summary.redacted_fraction > limit:
            log.info(
                "tool output not stored: rule %s, %.0f%% of its summary redacted (limit %.0f%%)",
                rule.id,
                summary.redacted_fraction * 100,
                limit * 100,
            )
            return IngestResult(
                stored=False,
                reason=f"{summary.redacted_fraction:.0%} of the summary was redacted (more than "
                f"{limit:.0%}): nothing was stored",
                rule_id=rule.id,
                summarizer=rule.summarizer,
                redaction_applied=True,
                provenance=provenance,
            )

        result = await self.working.add(
            summary.text,
            rule.attention,
            session_id=session_id,
            provenance=provenance,
            attention=rule.attention,
        )
        log.debug(
            "tool output stored as working-memory item %d: rule %s, %s, redactions %s",
            result.added_id,
            rule.id,
            rule.summarizer,
            provenance["redaction_counts"],
        )
        return IngestResult(
            stored=True,
            reason=f"matched extraction rule {rule.id!r}",
            rule_id=rule.id,
            summarizer=rule.summarizer,
            redaction_applied=provenance["redaction_applied"],
            provenance=provenance,
            working_memory=result,
        )
