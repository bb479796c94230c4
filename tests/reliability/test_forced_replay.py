"""What a replay promises, and what `replay --force` does not (issue 19, item 7).

- A processed event replayed with `--force` (a real `hookinbox replay` process) whose re-run
  fails ends `failed` with the first run's writes still in place: "failed" no longer means "no
  effect". The event keeps the mark (`forced_replay_at`), which `events show --json` prints and
  the dashboard's event page states.
- Replaying a pending event (waiting for its next retry) gives it its full retry budget (its
  attempts keep counting) and makes it due now, as the docs say (docs/operations.md, docs/cli.md).

On SQLite and PostgreSQL.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import sqlalchemy as sa

from hookinbox import Event, HandlerContext, Inbox, RetryPolicy, Status
from hookinbox.dashboard import dashboard_app
from hookinbox.http._app import create_app
from hookinbox.sources import Stripe
from tests.cli.conftest import parsed
from tests.dashboard.conftest import TOKEN, Browser
from tests.reliability._report import Trial, record
from tests.support.server import run_cli
from tests.support.signing import stripe_delivery

pytestmark = pytest.mark.slow  # subprocesses: not in `make test-fast`

SECRET = "whsec_forced_replay"
effects = sa.Table(
    "rerun_effects",
    sa.MetaData(),
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("event_id", sa.String(64), nullable=False),
)


@dataclass
class Switch:
    failing: bool = False


@pytest.fixture
def shop(db_url: str) -> Iterator[tuple[Inbox, Switch]]:
    switch = Switch()
    inbox = Inbox(db_url, retry=RetryPolicy(max_attempts=1))
    inbox.add_source(Stripe(secret=SECRET))
    inbox.after_migrate(lambda connection: effects.create(connection, checkfirst=True))

    @inbox.handler("stripe", "order.paid")
    def ship(event: Event, ctx: HandlerContext) -> None:
        ctx.db.execute(effects.insert().values(event_id=event.id))  # the effect
        if switch.failing:
            raise RuntimeError("the carrier's API is down")

    # Its retry is an hour away, so a replay (which makes it due at once) is always sooner,
    # however long the replay's command takes on a loaded machine.
    @inbox.handler("stripe", "order.retried", retry=RetryPolicy(max_attempts=5, first_delay=3600))
    def retried(event: Event, ctx: HandlerContext) -> None:
        raise RuntimeError("not yet")

    inbox.migrate()
    yield inbox, switch
    inbox.close()


def _deliver(inbox: Inbox, event_id: str, event_type: str) -> None:
    event = {"id": event_id, "type": event_type, "created": int(time.time())}
    headers, body = stripe_delivery(event, SECRET)
    assert inbox.receive("stripe", headers, body).status_code == 200


def _effects(inbox: Inbox, event_id: str) -> int:
    query = sa.select(sa.func.count()).select_from(effects).where(effects.c.event_id == event_id)
    with inbox.store.reading() as connection:
        return int(connection.execute(query).scalar_one())


def test_a_failed_rerun_after_replay_force_leaves_the_first_runs_writes(
    shop: tuple[Inbox, Switch], db_url: str, backend: str
) -> None:
    inbox, switch = shop
    _deliver(inbox, "evt_forced", "order.paid")
    inbox.process_due()
    assert _effects(inbox, "evt_forced") == 1
    replayed = run_cli("replay", "stripe", "evt_forced", "--force", "--database-url", db_url)
    assert replayed.returncode == 0, replayed.stderr
    switch.failing = True
    inbox.process_due()
    event = inbox.store.get_event("stripe", "evt_forced")
    assert event is not None and event.status is Status.FAILED
    assert _effects(inbox, "evt_forced") == 1  # the first run's write is still there
    assert event.forced_replay_at is not None
    shown = parsed(
        run_cli("events", "show", "stripe", "evt_forced", "--json", "--database-url", db_url)
    )
    assert shown["forced_replay_at"] is not None
    admin = Browser(create_app(inbox._receiver, admin=dashboard_app(inbox.store, TOKEN)))
    assert admin.sign_in().status_code == 303
    page = admin.get("/admin/event", params={"source": "stripe", "id": "evt_forced"})
    assert page.status_code == 200
    assert 'id="forced"' in page.text and "Failed here does not mean no effect" in page.text
    record(
        Trial(
            fault="replay --force of a processed event whose re-run fails",
            backend=backend,
            deliveries=1,
            detail="first run's write kept (1 row) under status failed; forced_replay_at set, "
            "shown by events show --json and on the event page",
        )
    )


def test_replaying_a_pending_event_refills_its_retry_budget(
    shop: tuple[Inbox, Switch], db_url: str
) -> None:
    inbox, _ = shop
    _deliver(inbox, "evt_waiting", "order.retried")
    inbox.process_due()
    waiting = inbox.store.get_event("stripe", "evt_waiting")
    assert waiting is not None and (waiting.status, waiting.attempts) == (Status.PENDING, 1)
    assert waiting.next_attempt_at is not None
    replayed = run_cli("replay", "stripe", "evt_waiting", "--database-url", db_url)
    assert replayed.returncode == 0, replayed.stderr
    after = inbox.store.get_event("stripe", "evt_waiting")
    assert after is not None and (after.status, after.attempts) == (Status.PENDING, 1)
    assert after.attempts_since_replay == 0
    assert after.next_attempt_at is not None and after.next_attempt_at < waiting.next_attempt_at
    assert after.forced_replay_at is None  # it had never been processed
