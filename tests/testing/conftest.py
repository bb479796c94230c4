"""The test kit's plugin runs here as a user's conftest would use it, on both backends."""

from __future__ import annotations

import pytest

from tests.conftest import BACKENDS, MYSQL_URL, POSTGRES_URL, REQUIRE_MYSQL, REQUIRE_POSTGRES


@pytest.fixture(params=BACKENDS)
def hookinbox_database(request: pytest.FixtureRequest) -> str | None:
    """SQLite (the plugin's default), or a fresh database on the test PostgreSQL or MariaDB
    server: what `--hookinbox-db` gives a user's run."""
    if request.param == "sqlite":
        return None
    if request.param == "mysql":
        if not MYSQL_URL:
            if REQUIRE_MYSQL:
                pytest.fail("HOOKINBOX_TEST_MYSQL_URL is not set")
            pytest.skip("HOOKINBOX_TEST_MYSQL_URL is not set")
        return MYSQL_URL
    if not POSTGRES_URL:
        if REQUIRE_POSTGRES:
            pytest.fail("HOOKINBOX_TEST_POSTGRES_URL is not set")
        pytest.skip("HOOKINBOX_TEST_POSTGRES_URL is not set")
    return POSTGRES_URL
