"""Reconcile inside the worker (`--reconcile-every`): one run per period across workers, a log
line per source, a warning when events were missing, `hookinbox_reconciled_total{source}`."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import REGISTRY

from hookinbox import ConfigurationError, Inbox, WorkerOptions
from hookinbox._operations._reconcile_schedule import PeriodicReconcile, job_name
from hookinbox.sources import Stripe
from hookinbox.testing import FakeStripeAPI
from tests.apps import reconciling
from tests.support.listed import stripe_listed
from tests.support.loopback import Loopback, serving

pytestmark = pytest.mark.slow  # a loopback server per test

NOW = int(time.time())


@pytest.fixture
def api() -> FakeStripeAPI:
    return FakeStripeAPI([stripe_listed(n, NOW - 600 + n) for n in range(30)])


@pytest.fixture
def server(api: FakeStripeAPI) -> Iterator[Loopback]:
    with serving(api) as loopback:
        yield loopback


@pytest.fixture
def inbox(db_url: str, server: Loopback) -> Iterator[Inbox]:
    inbox = reconciling.build(db_url, api_base=server.url)
    inbox.migrate()
    yield inbox
    inbox.close()


def periodic(inbox: Inbox, at: list[datetime]) -> PeriodicReconcile:
    return PeriodicReconcile(
        inbox._operations(), inbox.sources["stripe"], inbox._takes, every=timedelta(hours=1),
        clock=lambda: at[0],
    )  # fmt: skip


def reconciled_total() -> float:
    return REGISTRY.get_sample_value("hookinbox_reconciled_total", {"source": "stripe"}) or 0.0


def test_one_worker_runs_each_period(
    inbox: Inbox, caplog: pytest.LogCaptureFixture, api: FakeStripeAPI
) -> None:
    at = [datetime.now(UTC)]
    first, second = periodic(inbox, at), periodic(inbox, at)
    counted = reconciled_total()
    with caplog.at_level(logging.INFO, logger="hookinbox.reconcile"):
        ran = first.run_due()
        assert second.run_due() is None and first.run_due() is None  # the period is claimed
    assert ran is not None and ran.stored == 30
    assert reconciled_total() - counted == 30
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "never arrived" in warnings[0].getMessage()
    assert "missing 30" in warnings[0].getMessage()
    caplog.clear()
    at[0] += timedelta(hours=1)  # the next period: whichever worker asks first runs it
    with caplog.at_level(logging.INFO, logger="hookinbox.reconcile"):
        again = second.run_due()
        assert again is not None and again.already_stored == 30
    assert [r.levelno for r in caplog.records] == [logging.INFO]
    assert "reconciled stripe: listed 30, already_stored 30, missing 0" in caplog.text


def test_a_failing_api_is_an_error_line_and_the_next_period_tries_again(
    inbox: Inbox, caplog: pytest.LogCaptureFixture, api: FakeStripeAPI
) -> None:
    api.api_key = "sk_test_revoked"
    at = [datetime.now(UTC)]
    with caplog.at_level(logging.INFO, logger="hookinbox.reconcile"):
        assert periodic(inbox, at).run_due() is None
    assert "reconcile of stripe failed: Stripe's API refused the API key (401)" in caplog.text


def test_a_worker_reconciles_and_processes(inbox: Inbox) -> None:
    options = WorkerOptions(handle_signals=False, poll_interval=0.05)
    worker = inbox.worker(options, reconcile_every=timedelta(hours=1))
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            done = inbox.store.operator.all_events()
            if len(done) == 30 and all(e.status.value == "processed" for e in done):
                break
            time.sleep(0.1)
    finally:
        worker.stop()
        thread.join(30)
    events = inbox.store.operator.all_events()
    assert len(events) == 30 and {e.received_via for e in events} == {"reconcile"}
    assert {e.status.value for e in events} == {"processed"}


def test_no_source_that_can_reconcile_is_refused(db_url: str) -> None:
    inbox = Inbox(db_url)
    inbox.add_source(Stripe(secret="whsec_x"))
    with pytest.raises(ConfigurationError, match="no source can reconcile"):
        inbox.worker(reconcile_every=timedelta(hours=1))
    inbox.close()


def test_each_source_claims_its_periods_under_a_row_of_its_own() -> None:
    assert job_name("stripe") == "reconcile:stripe"
    long_names = [job_name("s" * 64), job_name("s" * 63 + "t")]
    assert all(len(name) == 64 and name.startswith("reconcile:") for name in long_names)
    assert long_names[0] != long_names[1]
