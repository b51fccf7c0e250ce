"""ingestToolOutput through real HTTP (SPEC §3.8, §4)."""

from __future__ import annotations

from gql_memory.api.schema import build_schema
from tests.conftest import LiveServer

INGEST = """
mutation Ingest($input: ToolOutputInput!) {
  ingestToolOutput(input: $input) {
    stored ruleId summarizer redactionApplied reason provenance
    workingMemory { addedId evictedId archivedId currentCount }
  }
}
"""


async def ingest(api: LiveServer, **fields: object) -> dict:
    return (await api.data(INGEST, {"input": fields}))["ingestToolOutput"]


def test_the_mutation_and_its_types_are_named_as_in_the_spec() -> None:
    schema = build_schema()._schema
    assert schema.mutation_type is not None
    field = schema.mutation_type.fields["ingestToolOutput"]
    assert str(field.type) == "IngestResult!"
    assert str(field.args["input"].type) == "ToolOutputInput!"
    inputs = schema.type_map["ToolOutputInput"].fields  # type: ignore[union-attr]
    assert set(inputs) == {"toolName", "output", "sessionId", "metadata"}
    assert inputs["sessionId"].default_value == "default"


async def test_matching_output_is_stored_with_its_provenance(api: LiveServer) -> None:
    output = "$ git commit -m 'wip'\n[main 1a2b3c4] wip\nAuthor: dev@example.com"
    result = await ingest(
        api, toolName="Bash", output=output, sessionId="agent-1", metadata={"cwd": "/repo"}
    )
    assert result["stored"] is True and result["ruleId"] == "bash-git-commit"
    assert result["summarizer"] == "stdoutSummary" and result["redactionApplied"] is True
    assert result["workingMemory"]["currentCount"] == 1
    provenance = result["provenance"]
    assert provenance["rule_id"] == "bash-git-commit" and provenance["redaction_applied"]
    assert provenance["redaction_counts"] == {"email": 1}
    assert provenance["original_length"] == len(output)
    items = (
        await api.data(
            '{ workingMemory(sessionId: "agent-1") { id content importance provenance } }'
        )
    )["workingMemory"]
    assert items == [
        {
            "id": result["workingMemory"]["addedId"],
            "content": output.replace("dev@example.com", "[REDACTED]"),
            "importance": 0.7,
            "provenance": provenance,
        }
    ]


async def test_unmatched_output_is_not_stored_and_says_why(api: LiveServer) -> None:
    result = await ingest(api, toolName="WebFetch", output="<html>hi</html>")
    assert result == {
        "stored": False,
        "ruleId": None,
        "summarizer": None,
        "redactionApplied": False,
        "reason": "no extraction rule matched tool 'WebFetch'",
        "provenance": None,
        "workingMemory": None,
    }
    assert (await api.data("{ workingMemory { id } }"))["workingMemory"] == []


async def test_an_almost_all_secret_output_is_refused_politely(api: LiveServer) -> None:
    key = "\n".join(
        ["-----BEGIN PRIVATE KEY-----", *["QUJD" * 16] * 20, "-----END PRIVATE KEY-----"]
    )
    result = await ingest(api, toolName="Read", output=key, metadata={"file_path": "spec.md"})
    assert result["stored"] is False and result["ruleId"] == "read-spec"
    assert "nothing was stored" in result["reason"] and result["workingMemory"] is None
    assert (await api.data("{ workingMemory { id } }"))["workingMemory"] == []


async def test_empty_tool_name_or_output_is_bad_user_input(api: LiveServer) -> None:
    for fields, message in (
        ({"toolName": "", "output": "x"}, "toolName must not be empty"),
        ({"toolName": "Read", "output": ""}, "output must not be empty"),
        ({"toolName": "Read", "output": "x", "metadata": [1]}, "metadata must be a JSON object"),
    ):
        error = await api.error(INGEST, {"input": fields})
        assert error["extensions"]["code"] == "BAD_USER_INPUT"
        assert error["message"] == message
