"""Issue 46's proof: a FastAPI app on the async ORM (tests/apps/async_shop.py) served by
uvicorn, its async worker a `hookinbox worker` process of its own, a storm of 2,000 Stripe
events (duplicates, bursts, lost responses, updates before their checkout), and the worker
SIGKILLed mid-batch while the storm runs, a new one started each time.

Then, once drained, the simulator's check on the shop's own tables: every acknowledged event
stored once and processed, every order once, every subscription in its last update's status.
On SQLite (aiosqlite) and PostgreSQL (asyncpg). Long tier: 35-40 s per database on two cores
at a load average of 3, about 80 s at 10 (the storm's 30 s, then the backlog's drain).
"""

from __future__ import annotations

import signal
import sys
import threading
import time

import pytest

from hookinbox._storage import Store
from hookinbox.simulate import (
    SimulationConfig,
    SimulationReport,
    simulate,
    verify,
    wait_until_drained,
)
from tests.apps.async_shop import ORDERS_TABLE, SUBSCRIPTIONS_TABLE
from tests.conftest import async_twin
from tests.support.server import free_port, serving
from tests.support.workers import Workers, opened_store, status_counts, wait_for

SECRET = "whsec_async_storm"
SEED = 20260046
EVENTS = 2000
KILLS = 3
KILL_EVERY = 60
"""SIGKILL the worker each time this many more events are processed (and some are held):
the first two land in the storm (a new worker takes up to ten seconds to start on a loaded
machine), the third in the storm or in the backlog it leaves."""
MIN_HELD = 3
"""Kill only while the worker holds at least this many events, so that some are still held
when SIGKILL lands (an attempt may commit between the look and the kill)."""
GIVEN_BACK = "lease expired (worker lost); given back"
"""What a new worker logs for each event a killed one held."""
WORKER_ARGS = ("--lease-seconds", "2", "--concurrency", "8", "--grace-period", "10")
"""A short lease, so that what a killed worker held is taken again within seconds."""
EFFECTS_SQL = (
    f"SELECT o.payment_id, s.status FROM {ORDERS_TABLE} o "
    f"LEFT JOIN {SUBSCRIPTIONS_TABLE} s ON s.customer = o.customer"
)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    """The databases with an async driver in hookinbox (MariaDB has none: docs/async.md)."""
    return str(request.param)


@pytest.fixture(params=["sync"])
def driver(request: pytest.FixtureRequest) -> str:
    """The app and its workers are given the async twin of the sync URL (`async_twin`)."""
    return str(request.param)


def test_sigkilled_async_workers_lose_and_double_nothing_in_a_storm(db_url: str) -> None:
    url = async_twin(db_url)
    env = {"ASYNC_SHOP_DATABASE_URL": url, "ASYNC_SHOP_WORKER": "0",
           "STRIPE_WEBHOOK_SECRET": SECRET}  # fmt: skip
    port = free_port()
    server = [sys.executable, "-m", "uvicorn", "tests.apps.async_shop:app", "--port", str(port),
              "--log-level", "warning"]  # fmt: skip
    app = "tests.apps.async_shop:inbox"
    with (
        serving(server, port, env=env, ready_path="/webhooks/readyz") as base_url,
        opened_store(db_url, migrate=False) as store,
        Workers(url, *WORKER_ARGS, env=env, app=app) as workers,
    ):
        config = SimulationConfig(
            provider="stripe",
            secret=SECRET,
            target=f"{base_url}/webhooks/stripe",
            events=EVENTS,
            concurrency=8,
            rate=70,  # first deliveries per second: the storm lasts 30 s at least
            seed=SEED,
            duplicate_rate=0.03,
            burst_rate=0.02,
            lost_response_rate=0.02,
            out_of_order_rate=0.3,
        )
        reports: list[SimulationReport] = []
        storm = threading.Thread(target=lambda: reports.append(simulate(config, progress=False)))
        workers.start(1)
        storm.start()
        started = time.monotonic()
        kills: list[tuple[int, bool]] = []  # (events the dead worker held, storm running)
        try:
            processed = 0
            for _ in range(KILLS):
                processed, held = kill_mid_batch(store, workers, since=processed)
                kills.append((held, storm.is_alive()))
        finally:
            storm.join(timeout=300)
        assert reports, "the simulation did not finish"
        report = reports[0]
        drained = wait_until_drained(db_url, 120, since=report.started_at)
        assert drained, f"not drained: {status_counts(store)}\n{workers.describe()}"
        elapsed = time.monotonic() - started
        result = verify(report, db_url, effects_sql=EFFECTS_SQL)
        codes = workers.terminate_all(timeout=30)
        outputs = "\n".join(worker.output() for worker in workers.retired)  # whole, not tails

    print(
        f"\n{backend_name(db_url)}: {len(report.acknowledged)} acknowledged of {report.events}"
        f" ({report.deliveries} deliveries, {report.reached} reached the server),"
        f" duplicates absorbed {result.duplicates_absorbed}, processed {result.processed},"
        f" effects {result.effects_found}/{result.effects_expected}, final states"
        f" {result.states_checked} checked {result.states_wrong} wrong, lost {result.lost},"
        f" doubled {result.doubled}, SIGKILLs (events held, during the storm) {kills},"
        f" {outputs.count(GIVEN_BACK)} held events given back,"
        f" storm {report.elapsed:.1f} s, drained in {elapsed:.1f} s"
    )
    assert report.complete and len(report.acknowledged) == EVENTS
    assert report.invalid_accepted == 0
    assert (result.lost, result.doubled, result.invalid_accepted) == (0, 0, 0)
    assert result.problems == (), result.problems
    assert result.processed == result.expected == EVENTS  # every acknowledged event processed
    assert result.effects_found == result.effects_expected == len(report.expected_effects)
    assert result.states_checked > 50 and result.states_wrong == 0
    assert result.duplicates_absorbed is not None and result.duplicates_absorbed > 50
    assert result.ok
    assert len(kills) == KILLS and all(held for held, _ in kills)
    assert sum(during for _, during in kills) >= 2, f"fewer than two kills in the storm: {kills}"
    # The kills cut held work, and what the next workers gave back was held by a dead one.
    # Not "each held event given back": in a full `make test-long` (2 workers, other storms
    # beside it) 12 of 20 and 15 of 26 held events were logged as given back, the others
    # processed once all the same (lost 0, doubled 0 above); alone, every run matched.
    given_back = outputs.count(GIVEN_BACK)
    assert 0 < given_back <= sum(held for held, _ in kills), outputs[-5000:]
    assert set(codes.values()) == {0}, f"exit codes {codes}\n{outputs[-5000:]}"
    assert "Traceback" not in outputs, outputs[-5000:]


def kill_mid_batch(store: Store, workers: Workers, *, since: int) -> tuple[int, int]:
    """Once `KILL_EVERY` more events than `since` are processed while the worker holds a few,
    SIGKILL it and start a new one; returns the events processed before the kill, and how
    many the dead worker held (leased: waiting their turn, or their attempt cut off)."""
    counts: dict[str, int] = {}

    def mid_batch() -> bool:
        counts.clear()
        counts.update(status_counts(store))
        processed, held = counts.get("processed", 0), counts.get("processing", 0)
        return processed >= since + KILL_EVERY and held >= MIN_HELD

    wait_for(mid_batch, timeout=90, what=f"{KILL_EVERY} more events processed, some held",
             describe=lambda: f"{counts}\n{workers.describe()}", check=workers.check_alive,
             interval=0.05)  # fmt: skip
    [victim] = workers.live
    assert victim.kill() == -signal.SIGKILL, victim.describe()
    after = status_counts(store)  # nothing runs now: what is `processing` is the dead one's
    workers.retire(victim)
    workers.start(1)
    return after.get("processed", 0), after.get("processing", 0)


def backend_name(database_url: str) -> str:
    return database_url.split(":", 1)[0]
