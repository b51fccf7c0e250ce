"""Database access: engine and transactions, tables, migrations, embedded PostgreSQL."""

from gql_memory.db.engine import Database

__all__ = ["Database"]
