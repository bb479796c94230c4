"""A deadlock inside a handler's transaction on MariaDB, made for real: never run again in
place, since the transaction is the user's too.

The worker's processing transaction holds the claim, the handler's writes and the processed
mark. When InnoDB chooses it as a deadlock's victim it rolls all of them back: the handler's
write is gone, the claim with it, and the attempt ends as a failure with the deadlock as its
error, so the event stays due and the worker runs it again on its retry schedule (hookinbox
retries in place only transactions that are wholly its own: tests/storage/
test_mysql_deadlock.py). A handler that catches the deadlock and carries on cannot commit
what followed it. The rival and the checks of InnoDB's report are `tests/support/innodb.py`'s.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import sqlalchemy as sa

from hookinbox import Event, HandlerContext, Inbox, Status
from tests.apps.orders import orders
from tests.processing.conftest import Deliver, checkout, count, stored
from tests.support.clock import ManualClock
from tests.support.innodb import WEIGHT_TABLE, Observer, create_weight, retries, rival

pytestmark = pytest.mark.parametrize("backend", ["mysql"])


@pytest.mark.parametrize("swallowed", [False, True], ids=["raised", "swallowed"])
def test_a_handler_chosen_as_a_deadlock_victim_loses_its_writes_and_its_event_stays_due(
    inbox: Inbox, deliver: Deliver, clock: ManualClock, db_url: str, swallowed: bool
) -> None:
    create_weight(db_url)
    runs: list[int] = []

    @inbox.handler("stripe", "charge.captured")
    def contend(event: Event, ctx: HandlerContext) -> None:
        runs.append(ctx.attempt)
        ctx.db.execute(orders.insert().values(payment_id="pi_first", event_id=event.id))
        try:
            # Waits for the rival, which holds every row of its table, while holding the order.
            ctx.db.execute(sa.text(f"SELECT n FROM {WEIGHT_TABLE} WHERE id = 1 FOR UPDATE"))
        except sa.exc.OperationalError:
            if not swallowed:
                raise
        ctx.db.execute(orders.insert().values(payment_id="pi_after", event_id=event.id))

    assert deliver({**checkout(7), "type": "charge.captured"}).body["status"] == "accepted"
    observer = Observer(db_url)
    before = retries("ingest")
    try:
        with ThreadPoolExecutor(1) as pool, rival(db_url) as heavy:
            processed = pool.submit(inbox.process_due)
            observer.wait_for_a_waiter(besides=(heavy.thread_id,))
            # The rival asks for the handler's new order: a cycle, and the handler's
            # transaction weighs less. Once it is rolled back there is no order to lock.
            assert heavy.lock("orders", "payment_id = %s", "pi_first") == 0
            deadlock = observer.latest_deadlock()
            heavy.commit()
            assert processed.result(30) == 1
    finally:
        observer.close()

    assert heavy.thread_id in deadlock.sessions.values()
    assert deadlock.victim_session() != heavy.thread_id
    assert WEIGHT_TABLE in deadlock.victim_text()
    event = stored(inbox, "evt_7")
    assert (event.status, event.attempts) == (Status.PENDING, 1)  # due again, on its schedule
    assert event.last_error is not None
    if swallowed:
        assert "rolled back by a deadlock" in event.last_error
    else:
        assert "Deadlock found" in event.last_error
    assert count(inbox, orders) == 0  # nothing of the attempt was committed
    assert retries("ingest") == before  # not run again in place: the user's writes were in it

    clock.advance(6)
    assert inbox.process_due() == 1
    event = stored(inbox, "evt_7")
    assert (event.status, event.attempts) == (Status.PROCESSED, 2)
    assert runs == [1, 2]
    assert count(inbox, orders) == 2  # pi_first and pi_after, once each
