"""schema.graphql is in sync, and every type, field and argument is described."""

from __future__ import annotations

from graphql import GraphQLEnumType, GraphQLInputObjectType, GraphQLObjectType

from gql_memory.api.schema import build_schema, export_sdl
from tests.conftest import ROOT

OPERATIONS = {
    "Query": {"workingMemory", "workingMemoryItem", "staleMemory", "rawDialogue", "stats"},
    "Mutation": {
        "storeRawDialogue",
        "storeRawDialogueBatch",
        "addWorkingMemory",
        "accessWorkingMemory",
        "archiveWorkingMemory",
        "clearWorkingMemory",
        "restoreStaleMemory",
        "forgetSession",
    },
}


def test_schema_file_matches_the_code() -> None:
    checked_in = (ROOT / "schema.graphql").read_text()
    assert checked_in == export_sdl(), (
        "schema.graphql is stale: run `gql-memory export-schema --output schema.graphql`"
    )


def test_every_type_field_and_argument_has_a_description() -> None:
    schema = build_schema()._schema
    missing = []
    for name, type_ in schema.type_map.items():
        if name.startswith("__") or name in {"String", "Int", "Float", "Boolean", "ID"}:
            continue
        if not type_.description:
            missing.append(name)
        if isinstance(type_, GraphQLObjectType | GraphQLInputObjectType):
            for field_name, field in type_.fields.items():
                if not field.description:
                    missing.append(f"{name}.{field_name}")
                for arg_name, arg in getattr(field, "args", {}).items():
                    if not arg.description:
                        missing.append(f"{name}.{field_name}({arg_name})")
        if isinstance(type_, GraphQLEnumType):
            assert type_.values
    assert missing == []


def test_operation_names_are_the_contract() -> None:
    schema = build_schema()._schema
    assert schema.query_type is not None and schema.mutation_type is not None
    assert OPERATIONS["Query"] <= set(schema.query_type.fields)
    assert OPERATIONS["Mutation"] <= set(schema.mutation_type.fields)
    for name in (
        "RawDialogueInput",
        "WorkingMemoryInput",
        "RefKind",
        "ArchiveReason",
        "DateTime",
        "JSON",
    ):
        assert name in schema.type_map
