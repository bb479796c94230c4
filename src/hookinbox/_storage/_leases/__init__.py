"""How a queue's due rows are leased: one module per way a database can do it, behind one
interface (`Leasing`, `_base.py`), chosen once per queue by `leasing_for`.

- `_one_statement.py`: pick, write and return in one statement (PostgreSQL);
- `_read_then_write.py`: read the items, then write the lease, under the one writer's lock
  (SQLite);
- `_in_steps.py`: pick, write, read back (MariaDB).

Every way writes the same lease (token, expiry, one more attempt unless the previous lease
expired) to the same rows, oldest due first, and hands back the same rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hookinbox._storage._leases._base import LeaseParts, Leasing, Rows
from hookinbox._storage._leases._in_steps import InSteps
from hookinbox._storage._leases._one_statement import OneStatement
from hookinbox._storage._leases._read_then_write import ReadThenWrite

if TYPE_CHECKING:
    from hookinbox._storage._dialects._base import Dialect

__all__ = ["LeaseParts", "Leasing", "Rows", "leasing_for"]


def leasing_for(dialect: Dialect) -> type[Leasing]:
    """The way `dialect`'s database leases, from what it can do."""
    if dialect.returns_joined_rows:
        return OneStatement
    if dialect.single_writer:
        return ReadThenWrite
    return InSteps
