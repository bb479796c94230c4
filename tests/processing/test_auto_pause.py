"""Auto-pause (`add_source(..., auto_pause_after=N)`): N failed attempts in a row pause the
source (audited by "auto-pause", counted, one log line); its later events are stored, not
processed; a success ends the streak; resumed, the events are processed once."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
import sqlalchemy as sa

from hookinbox import Event, HandlerContext, Inbox, Status
from hookinbox._errors import ConfigurationError
from hookinbox._storage._schema import audit
from hookinbox.sources import Stripe
from tests.apps import orders as orders_app
from tests.support.clock import ManualClock
from tests.support.signing import stripe_delivery


def _shop(db_url: str, clock: ManualClock, limit: int) -> tuple[Inbox, dict[str, bool]]:
    inbox = Inbox(db_url, clock=clock)
    inbox.add_source(Stripe(secret=orders_app.STRIPE_SECRET), auto_pause_after=limit)
    down = {"on": True}

    @inbox.handler("stripe", "invoice.paid")
    def on_invoice(event: Event, ctx: HandlerContext) -> None:
        if down["on"]:
            raise RuntimeError("payments API down")

    return inbox, down


def _deliver(inbox: Inbox, clock: ManualClock, number: int) -> None:
    event: dict[str, Any] = {"id": f"evt_{number}", "type": "invoice.paid",
                             "created": int(clock()), "data": {"object": {}}}  # fmt: skip
    headers, body = stripe_delivery(event, orders_app.STRIPE_SECRET, timestamp=int(clock()))
    assert inbox.receive("stripe", headers, body).ok


def _wait_paused(inbox: Inbox) -> None:
    deadline = time.monotonic() + 20
    while inbox.paused_sources() != ["stripe"]:
        assert time.monotonic() < deadline, "the source was not paused"
        time.sleep(0.05)


def _wait_for_line(caplog: pytest.LogCaptureFixture, word: str) -> list[str]:
    """The log lines with `word`, once there is one (the pause runs in a thread of its own,
    which logs once its parking is done)."""
    deadline = time.monotonic() + 20
    while True:
        lines = [r.getMessage() for r in caplog.records if word in r.getMessage()]
        if lines or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def test_n_failures_in_a_row_pause_the_source_then_resume_processes_once(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock()
    inbox, down = _shop(db_url, clock, limit=3)
    try:
        for number in range(1, 4):
            _deliver(inbox, clock, number)
        with caplog.at_level(logging.WARNING, logger="hookinbox.worker"):
            assert inbox.process_due() == 3  # three failed attempts: retries scheduled
            _wait_paused(inbox)
            lines = _wait_for_line(caplog, "auto_pause_after")
        assert lines == [
            "stripe paused after 3 consecutive failed attempts (auto_pause_after); its events "
            "are kept, none processed until `hookinbox resume stripe`"
        ]
        _deliver(inbox, clock, 4)  # stored while paused
        clock.advance(3600)  # every retry due
        assert inbox.process_due() == 0
        statuses = {e.id: e.status for e in inbox.store.operator.all_events()}
        assert set(statuses.values()) == {Status.PAUSED}, statuses
        with inbox.store.reading() as connection:
            row = connection.execute(sa.select(audit.c.action, audit.c.actor, audit.c.reason)).one()
        assert tuple(row) == ("pause", "auto-pause", "3 consecutive failed attempts")

        down["on"] = False
        assert inbox.resume("stripe", actor="ops") == 4
        assert inbox.process_due() == 4
        events = inbox.store.operator.all_events()
        assert {e.status for e in events} == {Status.PROCESSED}
        assert sorted(e.attempts for e in events) == [1, 2, 2, 2]
    finally:
        inbox.close()


def test_a_success_ends_the_streak(db_url: str) -> None:
    clock = ManualClock()
    inbox, down = _shop(db_url, clock, limit=2)
    try:
        _deliver(inbox, clock, 1)
        assert inbox.process_due() == 1  # one failure
        down["on"] = False
        _deliver(inbox, clock, 2)
        assert inbox.process_due() == 1  # a success: the streak ends
        down["on"] = True
        _deliver(inbox, clock, 3)
        assert inbox.process_due() == 1  # one failure again, not two
        time.sleep(0.3)
        assert inbox.paused_sources() == []
    finally:
        inbox.close()


def test_auto_pause_after_is_a_whole_number_of_at_least_one(db_url: str) -> None:
    inbox = Inbox(db_url)
    for wrong in (0, -1, 1.5, float("nan")):
        with pytest.raises(ConfigurationError, match="auto_pause_after"):
            inbox.add_source(Stripe(secret="whsec_x"), auto_pause_after=wrong)  # type: ignore[arg-type]
