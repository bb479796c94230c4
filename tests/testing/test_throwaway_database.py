"""`throwaway_database` on PostgreSQL: the schema goes at the end, even held by a session."""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa

from hookinbox._storage._dialects._postgres import _scratch
from hookinbox.testing._databases import throwaway_database
from tests.conftest import POSTGRES_URL

pytestmark = pytest.mark.postgres


def schemas(engine: sa.Engine, name: str) -> int:
    query = sa.text("SELECT count(*) FROM pg_namespace WHERE nspname = :name")
    with engine.connect() as connection:
        return int(connection.execute(query, {"name": name}).scalar_one())


def test_a_session_left_in_a_transaction_does_not_hold_the_drop_forever(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A test's worker that never returned keeps its transaction open on a table of the
    schema: the drop waits its lock timeout, ends that session and drops the schema."""
    if not POSTGRES_URL:
        pytest.skip("HOOKINBOX_TEST_POSTGRES_URL is not set")
    monkeypatch.setattr(_scratch, "SCRATCH_DROP_WAIT", "1s")
    admin = sa.create_engine(POSTGRES_URL, poolclass=sa.NullPool)
    with throwaway_database(POSTGRES_URL) as url:
        name = sa.make_url(url).query["options"].split("search_path=")[1]
        holder = sa.create_engine(url, poolclass=sa.NullPool)
        stuck = holder.connect()
        stuck.exec_driver_sql("CREATE TABLE held (id int)")
        stuck.commit()
        stuck.exec_driver_sql("INSERT INTO held VALUES (1)")  # open: a lock on `held`
        started = time.monotonic()
    took = time.monotonic() - started
    assert schemas(admin, name) == 0
    assert 1 <= took < 10, took  # the lock timeout, then the drop: not forever
    with pytest.raises(sa.exc.OperationalError):  # its session was ended
        stuck.exec_driver_sql("SELECT 1")
    stuck.invalidate()
    holder.dispose()
    admin.dispose()


def test_an_idle_schema_is_dropped_at_once() -> None:
    if not POSTGRES_URL:
        pytest.skip("HOOKINBOX_TEST_POSTGRES_URL is not set")
    admin = sa.create_engine(POSTGRES_URL, poolclass=sa.NullPool)
    with throwaway_database(POSTGRES_URL) as url:
        name = sa.make_url(url).query["options"].split("search_path=")[1]
        engine = sa.create_engine(url, poolclass=sa.NullPool)
        with engine.begin() as connection:
            connection.exec_driver_sql("CREATE TABLE kept (id int)")
        engine.dispose()
        assert schemas(admin, name) == 1
    assert schemas(admin, name) == 0
    admin.dispose()
