"""`python -m gql_memory` is the `gql-memory` command."""

from gql_memory.cli import main

main()
