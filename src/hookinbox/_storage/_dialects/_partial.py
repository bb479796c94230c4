"""Partial indexes in one word (`partial`), for the tables (`_schema.py`) and the migrations.

An index of only the rows a query reads (the due, the leased, the unsent) is partial where the
database has partial indexes, PostgreSQL's and SQLite's `CREATE INDEX ... WHERE`, and whole
where it has none (MariaDB: the index covers every row, and the query's own WHERE does the
rest). SQLAlchemy spells that as one keyword per database (`postgresql_where=`,
`sqlite_where=`); they are named here once, instead of beside every index. A leaf that imports
nothing of hookinbox: the schema imports it while the dialect modules, which import the
schema, are being imported.
"""

from __future__ import annotations

from typing import Any

WHERE_KEYWORDS = ("postgresql_where", "sqlite_where")
"""The `Index` keywords of SQLAlchemy's dialects that take a partial index's WHERE."""


def partial(where: Any) -> dict[str, Any]:
    """The keyword arguments of an index (`sa.Index`, alembic's `op.create_index`) that holds
    only the rows where `where` is true, on every database that has partial indexes."""
    return dict.fromkeys(WHERE_KEYWORDS, where)
