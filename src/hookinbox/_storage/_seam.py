"""What a gateway is handed (`StoreSeam`): the part of `Store` the gateways use.

Every gateway (`_ingest.py`, `_queue.py`, `_operator.py`, `_housekeeping.py`, `_stats.py`,
`_liveness.py`, `_outbox.py`, `_ordering.py`), group commit, the listener and the pressure
gauge are built on a store but use only its engine, options, dialect and transactions: this
protocol names those and nothing more. So they import no `Store` (which imports every one of
them), and a store of another shape (Django's, an async engine's facade, a test's) is one
that satisfies it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol, TypeVar

from hookinbox._storage._transactions import Transactions

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from hookinbox._storage._dialects._base import Dialect

T = TypeVar("T")


class StoreSeam(Transactions, Protocol):
    """A store's engine, options, dialect and transactions, as the gateways use them."""

    @property
    def dialect(self) -> Dialect:
        """Everything that differs between databases (`_dialects/`)."""

    def reading(self) -> AbstractContextManager[Connection]:
        """A read-only transaction (on SQLite, one that never queues for the write lock)."""

    def housekeeping_transaction(self) -> AbstractContextManager[Connection]:
        """A transaction whose commit need not be durable on its own (the pruner's)."""

    def retry_deadlocks(self, work: Callable[[], T], operation: str) -> T:
        """`work()`, a transaction wholly hookinbox's own, run again when a deadlock chose it."""
