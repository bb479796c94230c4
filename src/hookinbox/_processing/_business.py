"""The second safety net: a unique constraint on a business field (seed 003).

A handler names the constraint that means "this effect already exists", e.g.
`business_key="orders.payment_id"`. If its write violates that constraint, the effect was
applied before (by another path, or by an event the provider sent under a second id): the
handler's writes roll back to a savepoint and the event is `processed` with outcome
`business_duplicate`, not retried. Any other integrity error is a real failure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hookinbox._errors import ConfigurationError
from hookinbox._records import UniqueViolation

_TABLE_COLUMNS = re.compile(r"^\s*(?P<table>[\w.]+?)\s*\((?P<columns>[^)]+)\)\s*$")
_TABLE_COLUMN = re.compile(r"^\s*(?P<table>\w+)\.(?P<column>\w+)\s*$")
_NAME = re.compile(r"^\s*(?P<name>\w+)\s*$")


@dataclass(frozen=True, slots=True)
class BusinessKey:
    """`orders.payment_id`, `orders(shop_id, number)`, or a constraint name (PostgreSQL only)."""

    table: str | None
    columns: frozenset[str]
    constraint: str | None

    @classmethod
    def parse(cls, text: str) -> BusinessKey:
        if match := _TABLE_COLUMNS.match(text):
            columns = frozenset(c.strip() for c in match["columns"].split(",") if c.strip())
            return cls(match["table"], columns, None)
        if match := _TABLE_COLUMN.match(text):
            return cls(match["table"], frozenset([match["column"]]), None)
        if match := _NAME.match(text):
            return cls(None, frozenset(), match["name"])
        raise ConfigurationError(
            f"business_key {text!r} must be table.column, table(col1, col2) or a constraint name"
        )

    def matches(self, violation: UniqueViolation) -> bool:
        if self.constraint is not None:
            return violation.constraint == self.constraint
        return violation.table == self.table and violation.columns == self.columns
