"""End-to-end tests of the operator commands (`status`, `events`, `replay`, `prune`).

State is set up in-process with the orders app (plus a second Stripe account, `connect`, and a
handler that fails while an outage lasts); then `python -m hookinbox ...` runs as a subprocess
against the same database, and the tests read its exit code, its output and the database.
Most states are reached by driving the real code (deliveries, `process_due`, a manual clock);
the few rows that are edited by hand say so where they are.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from hookinbox import Event, HandlerContext, Inbox, Status
from hookinbox._storage._schema import audit, deliveries, event_queue, events
from hookinbox.sources import Stripe
from tests.apps import orders
from tests.processing.conftest import checkout, subscription_update
from tests.support.clock import ManualClock
from tests.support.server import run_cli
from tests.support.signing import stripe_delivery


@pytest.fixture(params=["sqlite"])
def backend(request: pytest.FixtureRequest) -> str:
    """SQLite only: this layer asks storage's gateways and never the database itself, so it
    behaves alike on both (tests/storage runs every query on each; docs/development.md). A
    test about PostgreSQL here says so with `@pytest.mark.parametrize("backend", [...])`."""
    return str(request.param)


DAY = 86_400.0
APP = "tests.apps.orders:inbox"
CONNECT_SECRET = "whsec_test_connect_account"
UNREACHABLE = "postgresql://postgres@127.0.0.1:1/x"
CLI_TIMEOUT = 30.0

# -- events --------------------------------------------------------------------------------


def invoice(number: int | str) -> dict[str, Any]:
    """Handled by `on_invoice`, which fails while the shop's outage lasts."""
    return {
        "id": f"evt_{number}",
        "type": "invoice.paid",
        "created": int(time.time()),
        "data": {"object": {"id": f"in_{number}", "amount_paid": 1200}},
    }


def customer_created(number: int | str) -> dict[str, Any]:
    """No handler for this type: the event ends `unhandled`."""
    return {
        "id": f"evt_{number}",
        "type": "customer.created",
        "created": int(time.time()),
        "data": {"object": {"id": f"cus_{number}"}},
    }


def stale_checkout(number: int | str) -> dict[str, Any]:
    """Created 100 days ago, older than the 90-day retention: stored as `stale`."""
    return {**checkout(number), "created": int(time.time() - 100 * DAY)}


# -- running the command -------------------------------------------------------------------


def hookinbox(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m hookinbox ARGS` in a subprocess, bounded in time."""
    return run_cli(*args, timeout=CLI_TIMEOUT)


def hookinbox_all(*commands: Sequence[str]) -> list[subprocess.CompletedProcess[str]]:
    """Independent commands (reads, or refusals) at once: the suite spends its time starting
    interpreters, and these do not depend on each other's effects."""
    with ThreadPoolExecutor(max_workers=len(commands)) as pool:
        return list(pool.map(lambda args: hookinbox(*args), commands))


def parsed(result: subprocess.CompletedProcess[str]) -> Any:
    """The JSON document of a successful command."""
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    return json.loads(result.stdout)


def error_line(result: subprocess.CompletedProcess[str], code: int) -> str:
    """The one `error: ...` line of a failed command: exit `code`, nothing on stdout."""
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), result.stderr
    assert result.stdout == ""
    return lines[0]


def check_lines(result: subprocess.CompletedProcess[str], code: int) -> list[str]:
    """`status --check`'s output lines (one per breach, or `ok`); stderr stays empty."""
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert result.stderr == ""
    return result.stdout.strip().splitlines()


def when(text: str | None) -> datetime | None:
    """A time as `--json` prints it (`str(datetime)`)."""
    return None if text is None else datetime.fromisoformat(text)


# -- the shop --------------------------------------------------------------------------------


@dataclass
class Outage:
    """While `on`, the invoice handler raises: a payments API that is down."""

    on: bool = True


@dataclass
class Shop:
    """The orders app on a test database, driven in-process, and the CLI pointed at it."""

    inbox: Inbox
    clock: ManualClock
    db_url: str
    outage: Outage = field(default_factory=Outage)

    # -- driving the real code ----------------------------------------------------------

    def deliver(self, event: dict[str, Any], source: str = "stripe", times: int = 1) -> None:
        secret = CONNECT_SECRET if source == "connect" else orders.STRIPE_SECRET
        for _ in range(times):
            headers, body = stripe_delivery(event, secret, timestamp=int(self.clock()))
            reply = self.inbox.receive(source, headers, body)
            assert reply.ok, reply.body

    def process(self) -> int:
        return self.inbox.process_due()

    def fail(self, number: int | str, source: str = "stripe") -> None:
        """An invoice event driven to `failed`: both of its attempts (max_attempts=2) meet the
        outage; the manual clock skips the retry delay (5 s +/- 20%). Processes all that is due."""
        self.deliver(invoice(number), source)
        self.process()
        self.clock.advance(10)
        self.process()
        assert self.event(f"evt_{number}", source).status is Status.FAILED

    def miss_not_ready_deadline(self, number: int | str, payment: str) -> None:
        """A subscription update whose order never comes, driven past the 3-day NotReady
        deadline: received 3 days and 2 minutes ago on the manual clock, deferred, retried now.
        Leaves the clock at the present; processes all that is due."""
        self.clock.now = time.time() - 3 * DAY - 120
        self.deliver(subscription_update(number, payment=payment))
        self.process()
        assert self.event(f"evt_{number}").status is Status.DEFERRED
        self.catch_up()
        self.process()
        missed = self.event(f"evt_{number}")
        assert (missed.status, missed.outcome) == (Status.FAILED, "not_ready_deadline")

    def catch_up(self) -> None:
        """Move the manual clock to the wall clock (the CLI's `now`), never back."""
        self.clock.now = max(self.clock.now, time.time())

    # -- reading and editing rows -------------------------------------------------------

    def event(self, event_id: str, source: str = "stripe") -> Event:
        found = self.inbox.store.get_event(source, event_id)
        assert found is not None, f"{source} {event_id} is not stored"
        return found

    def statuses(self) -> dict[tuple[str, str], str]:
        """(source, event id) -> status, for every stored event."""
        stored = self.inbox.store.operator.all_events()
        return {(event.source, event.id): event.status.value for event in stored}

    def audit_trail(self, *columns: str) -> list[tuple[Any, ...]]:
        """`columns` of every `hookinbox_audit` row, oldest first."""
        query = sa.select(*(audit.c[name] for name in columns)).order_by(audit.c.id)
        with self.inbox.store.reading() as connection:
            return [tuple(row) for row in connection.execute(query)]

    def delivery_count(self) -> int:
        query = sa.select(sa.func.count()).select_from(deliveries)
        with self.inbox.store.reading() as connection:
            return int(connection.execute(query).scalar_one())

    def set_received_at(self, event_ids: Sequence[str], received_at: datetime) -> None:
        """Backdate events and their delivery log rows (an UPDATE: for ages the test cannot
        wait for; every command under test reads `received_at` only)."""
        with self.inbox.store.transaction() as connection:
            connection.execute(
                events.update()
                .where(events.c.event_id.in_(event_ids))
                .values(received_at=received_at, last_delivery_at=received_at)
            )
            connection.execute(
                deliveries.update()
                .where(deliveries.c.event_id.in_(event_ids))
                .values(received_at=received_at)
            )
            backdated = sa.select(events.c.id).where(events.c.event_id.in_(event_ids))
            connection.execute(
                event_queue.update()
                .where(event_queue.c.id.in_(backdated.scalar_subquery()))
                .values(received_at=received_at)
            )

    # -- the command, pointed at this database ------------------------------------------

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return hookinbox(*args, "--database-url", self.db_url)

    def cli_all(self, *commands: Sequence[str]) -> list[subprocess.CompletedProcess[str]]:
        return hookinbox_all(*([*args, "--database-url", self.db_url] for args in commands))


def ago(**delta: float) -> datetime:
    return datetime.now(UTC) - timedelta(**delta)


@pytest.fixture(autouse=True)
def plain_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI reads its defaults from HOOKINBOX_* variables: none may leak in from outside."""
    for name in (
        "HOOKINBOX_APP",
        "HOOKINBOX_DATABASE_URL",
        "HOOKINBOX_MAX_FAILED",
        "HOOKINBOX_MAX_PENDING_AGE",
        "HOOKINBOX_MAX_NOT_READY_DEADLINE",
        "HOOKINBOX_MAX_STALE",
    ):
        monkeypatch.delenv(name, raising=False)
    # These tests run no worker process, so none is ever alive; the liveness alarm has its
    # own tests (tests/processes/test_liveness.py), with real workers.
    monkeypatch.setenv("HOOKINBOX_MIN_WORKERS", "0")


@pytest.fixture
def shop(db_url: str) -> Iterator[Shop]:
    orders.create_tables(db_url)
    clock = ManualClock()
    inbox = orders.build(db_url, clock=clock)
    inbox.add_source(Stripe(secret=CONNECT_SECRET, name="connect"))
    shop = Shop(inbox, clock, db_url)

    @inbox.handler("stripe", "invoice.paid", max_attempts=2)
    @inbox.handler("connect", "invoice.paid", max_attempts=2)
    def on_invoice(event: Event, ctx: HandlerContext) -> None:
        if shop.outage.on:
            raise RuntimeError("payments API down")

    yield shop
    inbox.close()


def set_errors(shop: Shop, errors: dict[tuple[str, str], str]) -> None:
    """Events' last errors as a handler could have raised them (an UPDATE: the shop's outage
    writes one text for all)."""
    with shop.inbox.store.transaction() as connection:
        for (source, event_id), text in errors.items():
            connection.execute(
                events.update()
                .where(events.c.source == source, events.c.event_id == event_id)
                .values(last_error=text)
            )


def fail_with(shop: Shop, errors: dict[tuple[str, int], str]) -> None:
    """Invoice events driven to `failed` (`Shop.fail`), each with its own last error."""
    for source, number in errors:
        shop.fail(number, source=source)
    set_errors(shop, {(source, f"evt_{n}"): text for (source, n), text in errors.items()})
