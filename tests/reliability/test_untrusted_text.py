"""Any code point in untrusted text is stored and shown, never an exception (issue 19, item 2).

A lone surrogate (`"\\ud800"` in an authentic body) used to be accepted and then break every
place that wrote or rendered it: the worker could not record the handler's error (the event
stayed `processing` until its lease expired and ended `failed/worker_lost`), the relay could
not record a destination's error, and the dashboard's event page answered 500. NUL did the
same on PostgreSQL, whose text columns refuse it.

What it proves:
- `safe_text` (the one place that escapes) gives UTF-8-encodable, NUL-free text for any
  string, and leaves every other string exactly as it was (hypothesis);
- for arbitrary strings in a body, a stored header, a handler's error and a destination's
  answer, on SQLite and PostgreSQL: the event and the message end `failed` with the error
  recorded (escaped), and the dashboard's event page answers 200 (hypothesis, in process);
- with real processes: a `hookinbox worker` records the handler's and the destination's
  error of a `"\\ud800"` and a NUL note at the first attempt, `hookinbox events show`
  prints the event (exit 0) and a `hookinbox dashboard` serves its page (200).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hookinbox import Inbox
from hookinbox._storage import Store
from hookinbox._storage._schema import events, outbox
from hookinbox._text import safe_text
from hookinbox.dashboard import dashboard_app
from hookinbox.http._app import create_app
from tests.apps import untrusted
from tests.dashboard.conftest import TOKEN, Browser, csrf_of
from tests.reliability._report import Trial, record
from tests.support.server import free_port, hookinbox_command, run_cli, serving
from tests.support.signing import stripe_delivery
from tests.support.workers import WorkerProcess, wait_for

APP = "tests.apps.untrusted:inbox"
NASTY = ("\ud800", "\x00", "a\udfff\x00b", "\ud83d\ude00 pair of halves", "\\ud800 already")
"""Notes every run tries, besides hypothesis's: lone surrogates, NUL, both, and a backslash."""

any_text = st.text(st.characters(exclude_categories=()), max_size=40)
"""Every code point, surrogates (category Cs) included: `st.text()` leaves them out."""


@given(any_text)
@example("\ud800")
@example("\x00")
def test_safe_text_is_encodable_and_changes_only_what_it_must(text: str) -> None:
    shown = safe_text(text)
    shown.encode("utf-8")  # never raises
    assert "\x00" not in shown
    if all(c != "\x00" and not 0xD800 <= ord(c) <= 0xDFFF for c in text):
        assert shown == text


def _delivery(event_id: str, event_type: str, note: str) -> tuple[dict[str, str], bytes]:
    event = {"id": event_id, "type": event_type, "created": int(time.time()), "note": note}
    headers, body = stripe_delivery(event, untrusted.STRIPE_SECRET)
    return {**headers, "User-Agent": note}, body  # a header that is stored with the event


def _deliver_notes(inbox: Inbox, prefix: str, note: str) -> dict[str, str]:
    """One delivery of each kind carrying `note`; {event type: event id}."""
    ids = {}
    for event_type in ("note.failed", "note.sent", "note.ok"):
        event_id = f"evt_{prefix}_{event_type.split('.')[1]}"
        headers, body = _delivery(event_id, event_type, note)
        reply = inbox.receive("stripe", headers, body)
        assert reply.status_code == 200, reply
        ids[event_type] = event_id
    return ids


def _recorded(store: Store, ids: dict[str, str]) -> dict[str, Any]:
    with store.engine.connect() as connection:
        rows = connection.execute(
            sa.select(
                events.c.event_id, events.c.status, events.c.outcome, events.c.last_error
            ).where(events.c.event_id.in_(ids.values()))
        ).all()
        messages = connection.execute(
            sa.select(outbox.c.status, outbox.c.last_error).where(
                outbox.c.event_id == ids["note.sent"]
            )
        ).all()
    by_id = {row.event_id: row for row in rows}
    return {
        "failed": by_id[ids["note.failed"]],
        "sent": by_id[ids["note.sent"]],
        "ok": by_id[ids["note.ok"]],
        "messages": messages,
    }


def _finished(found: dict[str, Any]) -> bool:
    """Each event has left `pending`: the failing one and the message it sent given up on."""
    messages = found["messages"]
    return (
        found["failed"].status == "failed"
        and bool(messages)
        and messages[0].status == "failed"
        # The worker takes due events in no promised order: the plain one may come last.
        and all(found[kind].status != "pending" for kind in ("sent", "ok"))
    )


def _assert_recorded(found: dict[str, Any], note: str) -> None:
    # What a handler reads: JSON joins an escaped surrogate pair into one code point.
    note = json.loads(json.dumps(note))
    failed = found["failed"]
    assert (failed.status, failed.outcome) == ("failed", "max_attempts"), failed
    assert failed.last_error.startswith(f"ValueError: {safe_text(note)}\n"), failed.last_error
    assert found["sent"].status == "processed"
    assert found["ok"].status == "processed"
    [message] = found["messages"]
    assert message.status == "failed"
    assert message.last_error == f"the remote answered: {safe_text(note)}"


@pytest.fixture
def shop(db_url: str) -> Iterator[Inbox]:
    inbox = untrusted.build(db_url)
    inbox.migrate()
    yield inbox
    inbox.close()


@pytest.mark.slow  # seconds by design: `make test`, not `make test-fast`
def test_any_string_in_bodies_headers_errors_and_answers(shop: Inbox, backend: str) -> None:
    dashboard = dashboard_app(shop.store, TOKEN, sources=["stripe"])
    admin = Browser(create_app(shop._receiver, admin=dashboard))
    assert admin.sign_in().status_code == 303
    tried: list[str] = []

    def check(note: str) -> None:
        ids = _deliver_notes(shop, str(len(tried)), note)
        tried.append(note)
        shop.process_due()
        _assert_recorded(_recorded(shop.store, ids), note)
        for event_id in ids.values():
            page = admin.get("/admin/event", params={"source": "stripe", "id": event_id})
            assert page.status_code == 200, page.text[:300]
        listing = admin.get("/admin/events")
        assert listing.status_code == 200

    run = given(any_text)(check)
    for note in NASTY:
        run = example(note)(run)
    quick = settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
    quick(run)()
    record(
        Trial(
            fault="any code point in bodies, stored headers, handler errors, destination answers",
            backend=backend,
            deliveries=3 * len(tried),
            detail=f"{len(tried)} notes (hypothesis, surrogates and NUL included), 3 events "
            "each: handler error and destination answer recorded escaped at the first attempt, "
            "event pages 200",
        )
    )


@pytest.mark.slow
def test_worker_cli_and_dashboard_processes_record_and_show_a_lone_surrogate(
    db_url: str, backend: str
) -> None:
    inbox = untrusted.build(db_url)
    inbox.migrate()
    ids = {note: _deliver_notes(inbox, f"proc{n}", note) for n, note in enumerate(NASTY[:3])}
    inbox.close()
    store = Store(db_url)
    worker = WorkerProcess(db_url, app=APP)
    try:
        wait_for(
            lambda: all(_finished(_recorded(store, each)) for each in ids.values()),
            timeout=30,
            what="the worker to record each failed event and message",
            describe=worker.describe,
        )
    finally:
        worker.close()
    for note, each in ids.items():
        _assert_recorded(_recorded(store, each), note)
    store.dispose()

    shown = run_cli(
        "events", "show", "stripe", ids["\ud800"]["note.failed"], "--database-url", db_url
    )
    assert shown.returncode == 0, shown.stderr
    assert "ValueError: \\ud800" in shown.stdout

    port = free_port()
    command = hookinbox_command("dashboard", APP, "--database-url", db_url, "--port", str(port))
    pages = {}
    with (
        serving(
            command, port, env={"HOOKINBOX_ADMIN_TOKEN": TOKEN}, ready_path="/admin/login"
        ) as base,
        httpx.Client(base_url=base) as client,
    ):
        csrf = csrf_of(client.get("/admin/login").text)
        assert client.post("/admin/login", data={"token": TOKEN, "csrf": csrf}).status_code == 303
        for each in ids.values():
            for event_id in each.values():
                response = client.get("/admin/event", params={"source": "stripe", "id": event_id})
                pages[event_id] = response.status_code
    assert set(pages.values()) == {200}, pages
    record(
        Trial(
            fault="lone surrogate and NUL in a body: worker, relay, CLI and dashboard processes",
            backend=backend,
            deliveries=3 * len(ids),
            detail=f"{len(ids)} notes ({', '.join(json.dumps(n) for n in ids)}): each handler "
            "error and destination answer recorded escaped at the first attempt (no lease "
            f"expiry); `events show` exit 0; {len(pages)} dashboard event pages 200",
        )
    )


def test_safe_text_is_the_storage_type_of_every_error_column() -> None:
    from hookinbox._storage._schema import jobs
    from hookinbox._storage._types import SafeText

    columns = [events.c.last_error, outbox.c.last_error, jobs.c.last_result]
    assert all(isinstance(column.type, SafeText) for column in columns)
