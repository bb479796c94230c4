"""The simulator against hookinbox itself: the example shop served by `hookinbox serve`.

Every kind of trouble at once, on SQLite and PostgreSQL; then, once the worker has drained,
the database must hold each acknowledged event once, processed, each order once, each
subscription in its last state, and nothing from a forged, expired or malformed delivery.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from hookinbox._storage import Store
from hookinbox._storage._schema import events
from hookinbox.simulate import (
    SimulationConfig,
    build_plan,
    simulate,
    verify,
    wait_until_drained,
)
from tests.support.server import running_server

pytestmark = pytest.mark.slow  # subprocesses: not in `make test-fast`

SEED = 20261129


def test_the_shop_applies_every_acknowledged_event_exactly_once(db_url: str) -> None:
    with running_server("hookinbox.examples.shop:inbox", db_url) as base_url:
        config = SimulationConfig(
            provider="stripe",
            secret="whsec_local_trial",
            target=f"{base_url}/webhooks/stripe",
            events=300,
            concurrency=16,
            seed=SEED,
            duplicate_rate=0.03,
            burst_rate=0.03,
            burst_size=4,
            lost_response_rate=0.03,
            out_of_order_rate=0.5,
            forged_rate=0.02,
            expired_rate=0.02,
            malformed_rate=0.02,
        )
        report = simulate(config, progress=False)
        assert wait_until_drained(db_url, 45, since=report.started_at)
        result = verify(report, db_url)

    # The run itself: everything sent and acknowledged, each kind answered as it must be.
    planned = build_plan(config, seed=SEED, now=0).counts()
    assert report.complete
    assert len(report.acknowledged) == report.events == 300
    assert report.by_kind["first"] == {"200": planned["first"] - 9, "lost": 9}
    assert report.by_kind["burst"] == {"200": 9 * 4}
    assert report.by_kind["retry"] == {"200": 9}  # one per lost response, none superseded
    assert report.invalid == {"forged": {"401": 6}, "expired": {"401": 6}, "malformed": {"400": 6}}
    assert report.invalid_accepted == 0
    assert report.latency is not None and report.latency.p50 > 0

    # The database: exactly once, in effect.
    assert result.checked == ("hookinbox_events", "effects")
    assert (result.lost, result.doubled, result.invalid_accepted) == (0, 0, 0)
    assert result.processed == result.expected == 300
    assert result.effects_found == result.effects_expected == len(report.expected_effects) > 100
    assert result.states_checked > 20 and result.states_wrong == 0
    assert result.problems == () and result.notes == () and result.ok
    # Every delivery that reached the server was recorded, including the 9 whose answer we
    # dropped: the work committed, only the response was lost.
    assert result.duplicates_absorbed == report.reached - 300
    store = Store(db_url)
    with store.engine.connect() as connection:
        rows = connection.execute(sa.select(sa.func.count()).select_from(events)).scalar_one()
    store.dispose()
    assert rows == 300  # nothing forged, expired or malformed was stored
