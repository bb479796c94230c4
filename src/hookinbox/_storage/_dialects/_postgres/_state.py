"""What PostgreSQL says of itself: its clock, the other sessions' work seen by the pruner
(`pg_stat_activity`), and space after a prune (autovacuum's)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy import Connection

from hookinbox._records import Pressure
from hookinbox._storage._dialects._base import Dialect

if TYPE_CHECKING:
    from hookinbox._storage._transactions import Transactions


class PostgresState(Dialect):
    """The part of the dialect that answers for the database's own state."""

    def now(self, connection: Connection) -> datetime:
        """The server's `now()` (the transaction's start)."""
        now: datetime = connection.execute(sa.select(sa.func.now())).scalar_one()
        return now.astimezone(UTC)

    def pressure_mark(self, connection: Connection) -> object:
        return connection.execute(_NOW).scalar_one()

    def pressure_since(self, connection: Connection, mark: object) -> Pressure:
        # pg_stat_activity is live (unlike the cumulative statistics, flushed about once a
        # second), and read once per transaction: the caller ends the transaction after.
        others, waiting = connection.execute(_OTHERS, {"since": mark}).one()
        return Pressure(int(others), int(waiting))

    # Space after a prune: autovacuum makes it reusable (docs/storage.md has what to tune).

    def checkpoint_passive(self, store: Transactions) -> None:
        """PostgreSQL's checkpointer runs on its own."""

    def free_pages(self, store: Transactions) -> int:
        return 0

    def give_back_pages(self, store: Transactions, pages: int) -> int:
        return 0


# -- the pruner's view of the others ------------------------------------------------------------

_NOW = sa.text("SELECT clock_timestamp()")
_OTHERS = sa.text(
    "SELECT count(*) FILTER (WHERE state = 'active' OR state_change > :since),"
    "       count(*) FILTER (WHERE wait_event_type IN ('Lock', 'LWLock', 'IO'))"
    "  FROM pg_stat_activity"
    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
    "   AND backend_type = 'client backend'"
)
