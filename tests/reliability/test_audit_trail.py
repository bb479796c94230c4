"""The audit trail (issue 24, item 2): every replay is a row, committed with the replay.

- A real `hookinbox replay --force --reason` process writes one row: when, who (the OS user
  running it), why, and the status, outcome and attempts the replay reset. A bulk replay
  (`--status failed`) writes one per event. `events show --json` lists them oldest first.
- The dashboard's replay POST writes a row by "dashboard" with the form's reason; the event
  page lists it.
- A replay refused (needs --force, unknown) writes no row, and a replay whose update fails in
  the database rolls its audit row back with it.

On SQLite and PostgreSQL.
"""

from __future__ import annotations

import getpass
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa

from hookinbox import Event, HandlerContext, Inbox, RetryPolicy, Status
from hookinbox._records import Actor, ReplayResult
from hookinbox._storage._schema import audit
from hookinbox._text import safe_text
from hookinbox.dashboard import dashboard_app
from hookinbox.http._app import create_app
from hookinbox.sources import Stripe
from tests.cli.conftest import parsed
from tests.dashboard.conftest import TOKEN, Browser, csrf_of
from tests.reliability._report import Trial, record
from tests.support.server import run_cli
from tests.support.signing import stripe_delivery

SECRET = "whsec_audit_trail"


@pytest.fixture
def inbox(db_url: str) -> Iterator[Inbox]:
    inbox = Inbox(db_url, retry=RetryPolicy(max_attempts=1))
    inbox.add_source(Stripe(secret=SECRET))

    @inbox.handler("stripe", "order.paid")
    def ship(event: Event, ctx: HandlerContext) -> None:
        if event.payload["data"]["fail"]:
            raise RuntimeError("the carrier's API is down")

    inbox.migrate()
    yield inbox
    inbox.close()


def _deliver(inbox: Inbox, event_id: str, *, fail: bool = False) -> None:
    event = {
        "id": event_id,
        "type": "order.paid",
        "created": int(time.time()),
        "data": {"fail": fail},
    }
    headers, body = stripe_delivery(event, SECRET)
    assert inbox.receive("stripe", headers, body).status_code == 200


def _rows(inbox: Inbox) -> int:
    with inbox.store.reading() as connection:
        return int(connection.execute(sa.select(sa.func.count()).select_from(audit)).scalar_one())


def _shown(db_url: str, event_id: str) -> dict[str, Any]:
    shown = run_cli("events", "show", "stripe", event_id, "--json", "--database-url", db_url)
    return parsed(shown)


@pytest.mark.slow
def test_cli_replays_write_who_when_why_and_what_was_reset(
    inbox: Inbox, db_url: str, backend: str
) -> None:
    _deliver(inbox, "evt_done")
    _deliver(inbox, "evt_broken", fail=True)
    inbox.process_due()
    before = datetime.now(UTC)

    forced = run_cli(
        "replay", "stripe", "evt_done", "--force", "--reason", "carrier lost parcel 41",
        "--database-url", db_url,
    )  # fmt: skip
    bulk = run_cli(
        "replay", "--status", "failed", "--reason", "carrier back up", "--database-url", db_url
    )

    assert forced.returncode == 0, forced.stderr
    assert bulk.returncode == 0, bulk.stderr
    done = _shown(db_url, "evt_done")
    assert (done["attempts"], done["attempts_before_replay"]) == (1, 1)  # history, not reset
    [row] = done["audit"]
    at = datetime.fromisoformat(row.pop("at"))
    assert at >= before.replace(microsecond=0)
    assert row == {
        "action": "forced_replay",
        "actor": getpass.getuser(),
        "reason": "carrier lost parcel 41",
        "previous_status": "processed",
        "previous_outcome": "handled",
        "previous_attempts": 1,
    }
    [bulk_row] = _shown(db_url, "evt_broken")["audit"]
    assert (bulk_row["action"], bulk_row["reason"], bulk_row["previous_status"]) == (
        "replay",
        "carrier back up",
        "failed",
    )
    assert bulk_row["previous_attempts"] == 1 and bulk_row["actor"] == getpass.getuser()

    # A second replay adds a row: the trail is history, oldest first.
    inbox.process_due()
    again = run_cli("replay", "stripe", "evt_broken", "--database-url", db_url)
    assert again.returncode == 0, again.stderr
    trail = _shown(db_url, "evt_broken")["audit"]
    assert [(r["reason"], r["previous_status"]) for r in trail] == [
        ("carrier back up", "failed"),
        (None, "failed"),
    ]
    text = run_cli("events", "show", "stripe", "evt_broken", "--database-url", db_url)
    assert text.returncode == 0 and "carrier back up" in text.stdout
    record(
        Trial(
            fault="replay --force, bulk replay and a second replay, each with or without --reason",
            backend=backend,
            deliveries=2,
            detail="one audit row per replayed event: OS user, reason, previous status/outcome/"
            "attempts; listed oldest first by events show --json and its table",
        )
    )


def test_dashboard_replay_writes_a_row_shown_on_the_event_page(inbox: Inbox) -> None:
    """Any text in the reason (a form field is untrusted) is stored and shown escaped."""
    _deliver(inbox, "evt_page", fail=True)
    inbox.process_due()
    admin = Browser(create_app(inbox._receiver, admin=dashboard_app(inbox.store, TOKEN)))
    assert admin.sign_in().status_code == 303
    confirm = admin.get("/admin/event/replay", params={"source": "stripe", "id": "evt_page"})
    assert 'name="reason"' in confirm.text

    done = admin.post(
        "/admin/event/replay",
        data={"csrf": csrf_of(confirm.text), "source": "stripe", "id": "evt_page",
              "reason": "  <b>retry</b> after the fix\x00  "},
    )  # fmt: skip

    assert done.status_code == 303
    [row] = inbox.store.operator.audit_trail("stripe", "evt_page")
    assert (row["actor"], row["reason"], row["previous_status"]) == (
        "dashboard",
        safe_text("<b>retry</b> after the fix\x00"),  # NUL escaped: PostgreSQL refuses it
        "failed",
    )
    page = admin.get("/admin/event", params={"source": "stripe", "id": "evt_page"}).text
    assert "&lt;b&gt;retry&lt;/b&gt; after the fix" in page  # escaped, as all stored text
    assert "<td>dashboard</td>" in page
    assert "1 in all, over 2 runs (0 since the last replay)" in page  # attempts are history


def test_a_refused_or_failed_replay_writes_no_row(inbox: Inbox, backend: str) -> None:
    _deliver(inbox, "evt_kept")
    inbox.process_due()
    actor = Actor("tester", "should not be recorded")
    now = datetime.now(UTC)

    refused = inbox.store.operator.replay_one("stripe", "evt_kept", now, force=False, actor=actor)
    unknown = inbox.store.operator.replay_one("stripe", "evt_nope", now, force=True, actor=actor)
    assert (refused[0], unknown[0]) == (ReplayResult.NEEDS_FORCE, ReplayResult.NOT_FOUND)
    assert _rows(inbox) == 0

    # The database refuses the replay's update, after the audit row was inserted: both go.
    with inbox.store.transaction() as connection:
        for statement in _refusing_trigger(backend):
            connection.execute(sa.text(statement))
    with pytest.raises(Exception, match="replays are frozen"):
        inbox.store.operator.replay_one("stripe", "evt_kept", now, force=True, actor=actor)
    assert _rows(inbox) == 0
    event = inbox.store.get_event("stripe", "evt_kept")
    assert event is not None and event.status is Status.PROCESSED


def _refusing_trigger(backend: str) -> list[str]:
    if backend == "sqlite":
        return [
            "CREATE TRIGGER refuse_replays BEFORE UPDATE ON hookinbox_events "
            "BEGIN SELECT RAISE(ABORT, 'replays are frozen'); END"
        ]
    return [
        "CREATE FUNCTION refuse_replays() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'replays are frozen'; END $$",
        "CREATE TRIGGER refuse_replays BEFORE UPDATE ON hookinbox_events "
        "FOR EACH ROW EXECUTE FUNCTION refuse_replays()",
    ]


BIDI_REASON = "refund \u202eavil\u202c for \u2066order\u2069 \x1b[2J"
"""An audit reason that would read backwards on a page or a terminal, and wipe the latter."""


@pytest.mark.slow
def test_bidi_and_control_characters_in_a_reason_are_shown_escaped(
    inbox: Inbox, db_url: str, backend: str
) -> None:
    """Issue 31, item 14: a reason is shown as typed, never reordered by U+202E and its kin."""
    _deliver(inbox, "evt_bidi", fail=True)
    _deliver(inbox, "evt_bidi_page", fail=True)
    inbox.process_due()
    replayed = run_cli(
        "replay", "stripe", "evt_bidi", "--reason", BIDI_REASON, "--database-url", db_url
    )
    assert replayed.returncode == 0, replayed.stderr
    admin = Browser(create_app(inbox._receiver, admin=dashboard_app(inbox.store, TOKEN)))
    assert admin.sign_in().status_code == 303
    confirm = admin.get("/admin/event/replay", params={"source": "stripe", "id": "evt_bidi_page"})
    done = admin.post(
        "/admin/event/replay",
        data={"csrf": csrf_of(confirm.text), "source": "stripe", "id": "evt_bidi_page",
              "reason": BIDI_REASON},
    )  # fmt: skip
    assert done.status_code == 303

    shown = run_cli("events", "show", "stripe", "evt_bidi", "--database-url", db_url)
    page = admin.get("/admin/event", params={"source": "stripe", "id": "evt_bidi_page"}).text

    escaped = "refund \\u202eavil\\u202c for \\u2066order\\u2069 \\x1b[2J"
    assert shown.returncode == 0, shown.stderr
    for text in (shown.stdout, page):
        assert not set(text) & {"\u202e", "\u202c", "\u2066", "\u2069", "\x1b"}
    assert escaped in shown.stdout
    assert escaped in page
    # Stored as typed: the escape is for showing, the JSON document keeps the reason itself.
    assert _shown(db_url, "evt_bidi")["audit"][0]["reason"] == BIDI_REASON
    record(
        Trial(
            fault="bidi override (U+202E) and an escape sequence in an audit reason",
            backend=backend,
            deliveries=2,
            detail="events show and the dashboard's event page show \\u202e and \\x1b escaped; "
            "events show --json keeps the reason as typed",
        )
    )
