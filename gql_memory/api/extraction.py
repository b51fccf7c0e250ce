"""GraphQL API of the extraction pipeline: ``ingestToolOutput`` (SPEC §3.8, §4)."""

from __future__ import annotations

from typing import Annotated, Any, cast

import strawberry
from strawberry.scalars import JSON

from gql_memory.api.info import Info
from gql_memory.api.working import WorkingMemoryResult
from gql_memory.memory.extraction import pipeline as extraction


@strawberry.input(description="A tool's output, to be kept in working memory if a rule says so.")
class ToolOutputInput:
    tool_name: str = strawberry.field(
        description='Name of the tool that produced the output, e.g. "Read", "Grep", "Bash".'
    )
    output: str = strawberry.field(
        description="The tool's output, verbatim. Only its redacted summary is stored."
    )
    session_id: str = strawberry.field(
        default="default", description="Session whose working memory receives the item."
    )
    metadata: JSON | None = strawberry.field(
        default=None,
        description="Optional JSON object (e.g. the tool's input); redacted and kept in the "
        "provenance.",
    )


@strawberry.type(description="What happened to an ingested tool output.")
class IngestResult:
    stored: bool = strawberry.field(description="Whether a working-memory item was added.")
    rule_id: str | None = strawberry.field(
        description="Id of the extraction rule that matched, if any."
    )
    summarizer: str | None = strawberry.field(
        description="Summarizer the rule applied (firstLast500, matchCountSummary, "
        "stdoutSummary), if a rule matched."
    )
    redaction_applied: bool = strawberry.field(
        description="Whether the redaction gate replaced any secret with [REDACTED]."
    )
    reason: str = strawberry.field(
        description="Why the output was stored or not (no rule matched, too much redacted)."
    )
    provenance: JSON | None = strawberry.field(
        description="Stored with the item: rule_id, summarizer, redaction_applied, "
        "redaction_counts per family, original_length, summary_length, redacted_fraction."
    )
    working_memory: WorkingMemoryResult | None = strawberry.field(
        description="The working-memory add (new id, what was evicted), when stored."
    )

    @classmethod
    def from_domain(cls, result: extraction.IngestResult) -> IngestResult:
        return cls(
            stored=result.stored,
            rule_id=result.rule_id,
            summarizer=result.summarizer,
            redaction_applied=result.redaction_applied,
            reason=result.reason,
            provenance=cast(JSON, result.provenance),
            working_memory=(
                WorkingMemoryResult.from_domain(result.working_memory)
                if result.working_memory is not None
                else None
            ),
        )


ToolOutputArg = Annotated[
    ToolOutputInput, strawberry.argument(description="The tool output to ingest.")
]


@strawberry.type(description="Mutations of the extraction pipeline.")
class ExtractionMutations:
    @strawberry.mutation(
        description="Feed a tool output into working memory: the first matching extraction "
        "rule picks the summarizer and the importance (its attention); secrets are redacted "
        "before anything is stored. No matching rule: nothing is stored, and the result says so."
    )
    async def ingest_tool_output(self, info: Info, input: ToolOutputArg) -> IngestResult:
        result = await info.context.memory.extraction.ingest(
            input.tool_name,
            input.output,
            input.session_id,
            cast(dict[str, Any] | None, input.metadata),
        )
        return IngestResult.from_domain(result)
