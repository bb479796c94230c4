"""What a dialect is handed when it must reach the database itself (`Transactions`).

A store's engine, its options and its transactions, and nothing else: neither its dialect nor
its gateways. A dialect's `housekeeping`, `check_body_limit` and space-after-a-prune methods
take one; `Store` is one, and so is everything that satisfies `_seam.StoreSeam`. Kept apart
from the gateways' seam because that one names `Dialect`, and a dialect naming it back would
close an import cycle.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine

    from hookinbox._storage._options import StoreOptions


class Transactions(Protocol):
    """A store's engine and transactions, as a dialect uses them."""

    @property
    def engine(self) -> Engine: ...

    @property
    def options(self) -> StoreOptions: ...

    def ensure_schema(self) -> None:
        """Migrate (or check the schema) once per process, before the first statement."""

    def transaction(self) -> AbstractContextManager[Connection]:
        """A writing transaction: committed on success, rolled back on any exception."""

    def writing(self) -> AbstractContextManager[None]:
        """This process's turn at SQLite's one writer, for a write outside `transaction`."""
