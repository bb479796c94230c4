"""MariaDB stopped and started again under load: 503 while it is down, recovery by itself.

The run and its checks are `_restart.py`'s, shared with PostgreSQL's test; here the database
is on a throwaway server of the test's own (`_mariadb.py`: the shared server is never
touched), stopped twice during the run and started again: first `clean` (SIGTERM, MariaDB's
normal shutdown, as a planned restart), then `kill` (SIGKILL, a crash, followed by InnoDB's
crash recovery). Every commit answered 2xx must be found after the crash, and each of the
pool's connections that the restart broke is replaced (pre-ping) rather than failing a
delivery with a 500.
"""

from __future__ import annotations

import pytest

from tests.reliability._mariadb import MariaDBServer, StopMode
from tests.reliability._restart import check, ride_restarts

pytestmark = [pytest.mark.mysql, pytest.mark.slow]

SEED = 20261206
OUTAGES: tuple[StopMode, ...] = ("clean", "kill")


def test_mariadb_stopped_and_started_under_load_is_ridden_out(mariadb: MariaDBServer) -> None:
    database_url = mariadb.create_database("hookinbox")
    restarts = ride_restarts(mariadb, database_url, OUTAGES, seed=SEED)
    check(
        restarts,
        fault="MariaDB stopped and started under load (clean, then SIGKILL: a crash)",
        backend="mysql",
    )
