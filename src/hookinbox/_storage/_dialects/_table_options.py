"""What a table says its own way on one database, in one word each, for the tables
(`_schema.py`) and the migrations: a fill factor, a generated row id.

SQLAlchemy spells these per database (`postgresql_with=`, a type's `with_variant(..., "sqlite")`);
they are named here once, as `_partial.py` names a partial index's keywords, instead of beside
every table. A leaf that imports nothing of hookinbox, for the same reason as `_partial.py`.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Integer
from sqlalchemy.types import TypeEngine


def fill_factor(percent: int) -> dict[str, Any]:
    """The keyword arguments of a table (`sa.Table`) whose pages inserts fill to `percent`,
    where a table has a fill factor of its own (PostgreSQL's `WITH (fillfactor = ...)`; a
    migration sets it with `Dialect.set_fill_factor`)."""
    return {"postgresql_with": {"fillfactor": percent}}


def row_id_type() -> TypeEngine[int]:
    """The type of a generated row id: a bigint, but SQLite's `INTEGER` (only an `INTEGER
    PRIMARY KEY` is its rowid, the one column SQLite numbers by itself)."""
    return BigInteger().with_variant(Integer(), "sqlite")
