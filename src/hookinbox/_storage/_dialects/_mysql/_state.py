"""What MariaDB says of itself: its clock (UTC_TIMESTAMP), the other sessions' work seen by
the pruner (the process list), and space after a prune (InnoDB's)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy import Connection

from hookinbox._records import Pressure
from hookinbox._storage._dialects._base import Dialect

if TYPE_CHECKING:
    from hookinbox._storage._transactions import Transactions


class MySQLState(Dialect):
    """The part of the dialect that answers for the database's own state."""

    def now(self, connection: Connection) -> datetime:
        now: datetime = connection.exec_driver_sql("SELECT UTC_TIMESTAMP(6)").scalar_one()
        return now.replace(tzinfo=UTC)

    def pressure_mark(self, connection: Connection) -> object:
        return connection.exec_driver_sql("SELECT UTC_TIMESTAMP(6)").scalar_one()

    def pressure_since(self, connection: Connection, mark: object) -> Pressure:
        others, waiting = connection.execute(_OTHERS, {"since": mark}).one()
        return Pressure(int(others or 0), int(waiting or 0))

    # Space after a prune: InnoDB reuses freed pages itself (OPTIMIZE TABLE gives it back).

    def checkpoint_passive(self, store: Transactions) -> None:
        """InnoDB checkpoints on its own."""

    def free_pages(self, store: Transactions) -> int:
        return 0

    def give_back_pages(self, store: Transactions, pages: int) -> int:
        return 0


# -- the pruner's view of the others ------------------------------------------------------------

_OTHERS = sa.text(
    "SELECT SUM(command <> 'Sleep' OR time_ms < TIMESTAMPDIFF(MICROSECOND, :since,"
    "           UTC_TIMESTAMP(6)) / 1000),"
    "       SUM(state LIKE '%lock%')"
    "  FROM information_schema.processlist"
    " WHERE db = DATABASE() AND id <> CONNECTION_ID()"
)
