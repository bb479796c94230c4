"""`INSERT ... ON DUPLICATE KEY UPDATE`, spoken as the other dialects' `ON CONFLICT`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from hookinbox._storage._dialects._base import Upsert

# -- the upsert -------------------------------------------------------------------------------


class MySQLUpsert(mysql.Insert, Upsert):
    """`INSERT ... ON DUPLICATE KEY UPDATE`, spoken as the other dialects' `ON CONFLICT`.

    The conflict target is not named in MariaDB: any unique key conflicts (hookinbox's tables
    have one besides the generated primary key). A `where` becomes a CASE on each column
    set (assigned left to right, so the columns it reads are set last): the row stays as it
    was when it is false, and RETURNING then returns the row as it stands. `DO NOTHING` is
    `INSERT IGNORE`, which returns no row for the key that existed.
    """

    inherit_cache = True

    @property
    def excluded(self) -> Any:
        return self.inserted

    def on_conflict_do_update(
        self,
        *,
        index_elements: Sequence[Any] = (),
        set_: Mapping[str, Any],
        where: sa.ColumnElement[bool] | None = None,
    ) -> MySQLUpsert:
        table = self.table
        if where is None:
            return self.on_duplicate_key_update(list(set_.items()))
        where = _new_values(where)
        read = {c.name for c in sa.sql.visitors.iterate(where) if isinstance(c, sa.Column)}
        ordered = sorted(set_.items(), key=lambda item: item[0] in read)
        assigned = [
            (name, sa.case((where, _new_values(value)), else_=table.c[name]))
            for name, value in ordered
        ]
        return self.on_duplicate_key_update(assigned)

    def on_conflict_do_nothing(self, *, index_elements: Sequence[Any] = ()) -> MySQLUpsert:
        return self.prefix_with("IGNORE")


def _new_values(clause: Any) -> Any:
    """`excluded.<column>` (SQLAlchemy's `inserted`) as `VALUES(<column>)` inside a clause:
    SQLAlchemy replaces it only where it is a value set on its own."""

    def replace(element: Any, **_kw: Any) -> Any:
        table = getattr(element, "table", None)
        if isinstance(element, sa.Column | sa.sql.elements.ColumnClause) and (
            isinstance(table, sa.Alias) and table.name == "inserted"
        ):
            return sa.func.values(sa.literal_column(f"`{element.name}`"))
        return None

    if not isinstance(clause, sa.ColumnElement):
        return clause
    column: sa.ColumnElement[Any] = clause
    no_options: dict[str, Any] = {}
    return sa.sql.visitors.replacement_traverse(column, no_options, replace)
