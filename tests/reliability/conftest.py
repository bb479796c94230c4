"""Fixtures shared by the reliability tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.reliability import _mariadb
from tests.reliability._cluster import (
    REQUIRE_CLUSTER,
    PostgresCluster,
    throwaway_cluster,
    unavailable_reason,
)


@pytest.fixture
def cluster() -> Iterator[PostgresCluster]:
    """A throwaway PostgreSQL cluster of the test's own, to stop, crash or freeze."""
    reason = unavailable_reason()
    if reason is not None:
        if REQUIRE_CLUSTER:
            pytest.fail(reason)
        pytest.skip(reason)
    with throwaway_cluster() as started:
        yield started


@pytest.fixture
def mariadb() -> Iterator[_mariadb.MariaDBServer]:
    """A throwaway MariaDB server of the test's own, to stop, crash or make read-only."""
    reason = _mariadb.unavailable_reason()
    if reason is not None:
        if _mariadb.REQUIRE_SERVER:
            pytest.fail(reason)
        pytest.skip(reason)
    with _mariadb.throwaway_server() as started:
        yield started
