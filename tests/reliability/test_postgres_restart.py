"""PostgreSQL stopped and started again under load: 503 while it is down, recovery by itself.

The run and its checks are `_restart.py`'s, shared with MariaDB's test; here the database is a
throwaway cluster of the test's own (`_cluster.py`: the shared server is never touched),
stopped twice during the run and started again: first `fast` (a planned restart), then
`immediate` (a crash, followed by WAL recovery). Both stop modes in one run: a second server,
drain and cluster would cost more wall time than the second outage does, and the second
outage tests that the pools reconnect again.
"""

from __future__ import annotations

import pytest

from tests.reliability._cluster import PostgresCluster, StopMode
from tests.reliability._restart import check, ride_restarts

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

SEED = 20261130
OUTAGES: tuple[StopMode, ...] = ("fast", "immediate")


def test_postgres_stopped_and_started_under_load_is_ridden_out(cluster: PostgresCluster) -> None:
    database_url = cluster.create_database("hookinbox")
    restarts = ride_restarts(cluster, database_url, OUTAGES, seed=SEED)
    check(
        restarts,
        fault="PostgreSQL stopped and started under load (fast, then immediate: a crash)",
        backend="postgres",
    )
