"""Database access: engine and transactions, tables, migrations, embedded PostgreSQL."""

from gql_memory.db.database import Database

__all__ = ["Database"]
