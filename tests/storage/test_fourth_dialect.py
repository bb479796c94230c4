"""Issue 49's proof that a database plugs in without touching src/: the fixture dialect of
`fourth_dialect.py` (SQLite under `sqlitefixture://`) is registered here, and an inbox on it
migrates, ingests, processes (a business key's unique violation read by its error reader
included) and prunes, each step through that dialect."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hookinbox import Status
from hookinbox._storage import Store, _dialects, dialect_for_url
from hookinbox._storage._migrations import LATEST_VERSION
from tests.apps import orders as orders_app
from tests.operations.test_prune import count_by_status, insert_old
from tests.processing.conftest import checkout, count
from tests.storage import fourth_dialect
from tests.support.clock import ManualClock
from tests.support.signing import stripe_delivery


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    # The registry as it was, once the test is over: the fixture is known to this test only.
    monkeypatch.setattr(_dialects, "_DIALECTS", dict(_dialects._DIALECTS))
    fourth_dialect.install()
    yield f"{fourth_dialect.SCHEME}:///{tmp_path / 'fourth.db'}"


def test_a_fourth_dialect_migrates_ingests_processes_and_prunes(url: str) -> None:
    assert isinstance(dialect_for_url(url), fourth_dialect.FourthDialect)
    store = Store(url)
    assert isinstance(store.dialect, fourth_dialect.FourthDialect)  # found from the engine
    assert store.migrate() == (0, LATEST_VERSION)

    orders_app.create_tables(url)
    clock = ManualClock()
    inbox = orders_app.build(url, clock=clock)
    assert isinstance(inbox.store.dialect, fourth_dialect.FourthDialect)
    try:
        for event in (checkout(1), checkout(2, payment="pi_1"), checkout(1)):
            headers, body = stripe_delivery(event, orders_app.STRIPE_SECRET, timestamp=int(clock()))
            assert inbox.receive("stripe", headers, body).status_code == 200
        assert inbox.process_due() == 2
        assert count(inbox, orders_app.orders) == 1
        done = {e: inbox.store.get_event("stripe", e) for e in ("evt_1", "evt_2")}
        assert {e: event.status for e, event in done.items() if event} == {
            "evt_1": Status.PROCESSED,
            "evt_2": Status.PROCESSED,  # the same payment: a business duplicate, read by
        }  # the fixture's error reader (sqlite3's UNIQUE constraint message)
        assert done["evt_2"] is not None and done["evt_2"].outcome == "business_duplicate"

        insert_old(store, 5, Status.PROCESSED, "old")
        result = inbox.prune()
        assert result.events == 5
        assert count_by_status(store) == {"processed": 2}
    finally:
        inbox.close()
        store.dispose()


def test_the_fixture_is_gone_after_its_test() -> None:
    with pytest.raises(Exception, match="unsupported database 'sqlitefixture'"):
        dialect_for_url(f"{fourth_dialect.SCHEME}:///x.db")
