"""Out-of-order events (seed 000): NotReady, its deadline, and the ordering guard."""

from __future__ import annotations

import multiprocessing
import random
import time
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from hookinbox import (
    ConfigurationError,
    Event,
    HandlerContext,
    Inbox,
    NotReady,
    RetryPolicy,
    Status,
)
from hookinbox._processing import Processor, Schedule
from hookinbox._processing._service import Processing
from hookinbox._storage import Store
from hookinbox._storage._schema import ordering
from hookinbox.sources import Stripe
from tests.apps import orders as orders_app
from tests.apps.orders import subscriptions
from tests.processing.conftest import Deliver, checkout, count, stored, subscription_update
from tests.support.clock import ManualClock
from tests.support.signing import stripe_delivery

DAY = 86_400


def test_an_update_before_its_create_waits_for_it(
    inbox: Inbox, deliver: Deliver, clock: ManualClock
) -> None:
    deliver(subscription_update(2, payment="pi_1"))  # the update arrives 800 ms early
    inbox.process_due()
    update = stored(inbox, "evt_2")
    assert update.status is Status.DEFERRED
    assert update.attempts == 0  # NotReady spends no attempt
    assert update.deferrals == 1
    assert update.last_error == "NotReady: no order for pi_1 yet"
    assert count(inbox, subscriptions) == 0

    clock.advance(0.5)
    deliver(checkout(1, payment="pi_1"))  # the create
    inbox.process_due()
    assert stored(inbox, "evt_1").status is Status.PROCESSED
    assert stored(inbox, "evt_2").status is Status.DEFERRED  # its retry comes after ~1 s

    clock.advance(1)
    inbox.process_due()
    update = stored(inbox, "evt_2")
    assert (update.status, update.attempts, update.outcome) == (Status.PROCESSED, 1, "handled")
    assert count(inbox, subscriptions, subscriptions.c.payment_id == "pi_1") == 1


def test_deferral_past_the_deadline_fails_for_an_operator(
    inbox: Inbox, deliver: Deliver, clock: ManualClock
) -> None:
    deliver(subscription_update(2, payment="pi_never"))
    inbox.process_due()
    retries = 0
    while stored(inbox, "evt_2").status is Status.DEFERRED and retries < 500:
        clock.advance(3600)
        inbox.process_due()
        retries += 1
    event = stored(inbox, "evt_2")
    assert (event.status, event.outcome) == (Status.FAILED, "not_ready_deadline")
    assert event.attempts == 0
    assert event.deferred_since is not None
    waited = clock() - event.deferred_since.timestamp()
    assert 3 * DAY - 0.001 <= waited <= 3 * DAY + 3600  # failed at the 3-day deadline
    # Tried once per hour the clock moved (the waits are capped at 5 minutes), not in a loop.
    assert 30 < event.deferrals < 100


def test_retry_in_sets_the_next_try(inbox: Inbox, deliver: Deliver, clock: ManualClock) -> None:
    @inbox.handler("stripe", "payout.paid")
    def later(event: Event, ctx: HandlerContext) -> None:
        raise NotReady("bank not settled", retry_in=42)

    deliver(
        {"id": "evt_7", "type": "payout.paid", "created": int(time.time()), "data": {"object": {}}}
    )
    before = clock()
    inbox.process_due()
    event = stored(inbox, "evt_7")
    assert event.next_attempt_at is not None
    assert event.next_attempt_at.timestamp() - before == pytest.approx(42, abs=0.01)


@pytest.mark.parametrize("driver", ["sync"])  # the thread worker's Processor, by hand
def test_not_ready_is_tried_again_soon_then_gently_less_often(
    inbox: Inbox, deliver: Deliver, clock: ManualClock
) -> None:
    """NotReady's own schedule, not the failure backoff (this inbox's is 5 s, x4): ~1 s, then
    1.5 times longer each time, spread by the jitter (from the processor's injected rng), up
    to 5 minutes."""
    processor = Processor(
        Processing(inbox.store),
        inbox._registry.handlers,
        policy=inbox.settings.retry,
        source_policies=inbox._registry.source_retry,
        clock=clock,
        rng=random.Random(20),
    )
    draws = random.Random(20)  # the same sequence: one draw per deferral
    deliver(subscription_update(2, payment="pi_late"))
    waits = []
    for deferral in range(1, 21):
        now = processor.now()
        until = now + timedelta(minutes=1)
        [leased] = inbox.store.events.lease(limit=1, now=now, until=until).fresh
        assert processor.process(leased) == "deferred"
        event = stored(inbox, "evt_2")
        assert (event.status, event.deferrals, event.attempts) == (Status.DEFERRED, deferral, 0)
        assert event.next_attempt_at is not None
        wait = event.next_attempt_at.timestamp() - clock()
        base = min(300.0, 1.5 ** (deferral - 1))
        assert wait == pytest.approx(base * (1 + draws.uniform(-0.2, 0.2)), abs=0.001)
        waits.append(wait)
        clock.advance(wait + 0.001)
    assert 0.8 <= waits[0] <= 1.2
    assert 240 <= waits[-1] <= 360  # capped at 300 s +/- 20 %


def test_not_ready_waits_never_pass_the_deadline_and_follow_the_policy(
    db_url: str, clock: ManualClock
) -> None:
    inbox = Inbox(db_url, clock=clock, retry=RetryPolicy(jitter=0, not_ready_deadline=30))
    inbox.add_source(Stripe(secret=orders_app.STRIPE_SECRET))

    @inbox.handler("stripe", "payout.paid", retry=RetryPolicy(not_ready_max_delay=4))
    def not_yet(event: Event, ctx: HandlerContext) -> None:
        raise NotReady("bank not settled")

    headers, body = stripe_delivery(
        {"id": "evt_1", "type": "payout.paid", "created": int(clock()), "data": {"object": {}}},
        orders_app.STRIPE_SECRET,
        timestamp=int(clock()),
    )
    assert inbox.receive("stripe", headers, body).status_code == 200
    first = clock()
    tries = []
    while True:
        inbox.process_due()
        event = stored(inbox, "evt_1")
        if event.status is not Status.DEFERRED:
            break
        assert event.next_attempt_at is not None
        tries.append(event.next_attempt_at.timestamp() - first)
        clock.now = event.next_attempt_at.timestamp() + 0.0001
    # 1, 1.5, 2.25, 3.375, then the handler's cap of 4 s, and the last wait cut at the deadline
    expected = [1, 2.5, 4.75, 8.125, 12.125, 16.125, 20.125, 24.125, 28.125, 30]
    assert tries == pytest.approx(expected, abs=0.01)
    assert (event.status, event.outcome, event.attempts) == (
        Status.FAILED,
        "not_ready_deadline",
        0,
    )
    inbox.close()


def test_a_not_ready_cap_must_be_positive() -> None:
    with pytest.raises(
        ConfigurationError, match="not_ready_max_delay must be more than 0 and at most"
    ):
        RetryPolicy(not_ready_max_delay=0)


def test_the_not_ready_schedule() -> None:
    schedule = Schedule.resolve(RetryPolicy(jitter=0), None, [])
    waits = [schedule.not_ready_delay(n) for n in (1, 2, 3, 4, 5, 10, 15, 16, 17, 1000)]
    expected = [1, 1.5, 2.25, 3.375, 5.0625, 38.443, 291.929, 300, 300, 300]
    assert waits == pytest.approx(expected, abs=0.001)
    failures = [schedule.delay(n) for n in (1, 2, 3)]
    assert failures == [5, 20, 80]  # the failure backoff is another schedule, unchanged


def test_the_ordering_guard_skips_stale_updates(
    inbox: Inbox, deliver: Deliver, clock: ManualClock
) -> None:
    applied: list[str] = []

    @inbox.handler("stripe", "customer.updated")
    def on_customer(event: Event, ctx: HandlerContext) -> None:
        customer = event.payload["data"]["object"]
        if ctx.ordering.advance(f"customer:{customer['id']}", event.payload["created"]):
            applied.append(event.id)

    def update(number: int, created: int) -> dict[str, object]:
        return {
            "id": f"evt_{number}",
            "type": "customer.updated",
            "created": created,
            "data": {"object": {"id": "cus_1"}},
        }

    base = int(time.time())
    deliver(update(1, created=base + 100))
    deliver(update(3, created=base + 300))
    inbox.process_due()
    deliver(update(2, created=base + 200))  # older than what was applied: stale
    deliver(update(4, created=base + 300))  # same second as the newest: applied
    inbox.process_due()
    assert applied == ["evt_1", "evt_3", "evt_4"]
    assert stored(inbox, "evt_2").status is Status.PROCESSED  # skipped, not failed
    with inbox.store.engine.connect() as connection:
        row = connection.execute(sa.select(ordering)).one()
    assert (row.object_key, row.position, row.event_id) == ("customer:cus_1", base + 300, "evt_4")


def test_a_rolled_back_handler_leaves_no_ordering_mark(inbox: Inbox, deliver: Deliver) -> None:
    @inbox.handler("stripe", "customer.updated")
    def advance_then_fail(event: Event, ctx: HandlerContext) -> None:
        ctx.ordering.advance("customer:cus_1", datetime(2026, 1, 1, tzinfo=UTC))
        raise RuntimeError("after the guard")

    deliver(
        {
            "id": "evt_1",
            "type": "customer.updated",
            "created": int(time.time()),
            "data": {"object": {}},
        }
    )
    inbox.process_due()
    with inbox.store.engine.connect() as connection:
        assert connection.execute(sa.select(sa.func.count()).select_from(ordering)).scalar() == 0


def _advance_many(url: str, seed: int, results: multiprocessing.Queue[tuple[int, bool]]) -> None:
    from hookinbox._model import Event
    from hookinbox._processing._context import Ordering

    store = Store(url)
    processing = Processing(store)
    rng = random.Random(seed)
    event = Event(
        0,
        "stripe",
        f"evt_{seed}",
        None,
        None,
        datetime.now(UTC),
        b"{}",
        {},
        Status.PROCESSING,
        1,
        1,
    )
    for _ in range(40):
        position = rng.randrange(1_000_000)
        with store.transaction() as connection:
            applied = Ordering(processing, connection, event, lambda: 0.0).advance("obj", position)
        results.put((position, applied))
    store.dispose()


@pytest.mark.slow  # processes: `make test`, not `make test-fast`
def test_the_ordering_guard_is_race_safe(db_url: str) -> None:
    """Four processes advance one key concurrently: the mark ends at the maximum, and every
    position reported as applied was the newest at its moment (never below an applied one)."""
    context = multiprocessing.get_context("spawn")
    results: multiprocessing.Queue[tuple[int, bool]] = context.Queue()
    workers = [context.Process(target=_advance_many, args=(db_url, s, results)) for s in range(4)]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=60) for _ in range(160)]
    for worker in workers:
        worker.join(timeout=30)
        assert worker.exitcode == 0
    store = Store(db_url)
    with store.engine.connect() as connection:
        final = connection.execute(sa.select(ordering.c.position)).scalar_one()
    store.dispose()
    assert final == max(position for position, _ in outcomes)
    assert any(applied for _, applied in outcomes) and not all(applied for _, applied in outcomes)
