"""Every page, on SQLite and PostgreSQL, over events delivered and processed for real."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from hookinbox import Status
from hookinbox._operations import Thresholds
from hookinbox._records import Beat
from hookinbox._storage import Store
from hookinbox._storage._schema import workers
from hookinbox.dashboard import dashboard_app
from tests.cli.conftest import UNREACHABLE, Shop, customer_created, fail_with
from tests.dashboard.conftest import TOKEN, Browser, csrf_of
from tests.processing.conftest import checkout


def event_ids(page: str) -> list[str]:
    """The event ids listed on an events page, in order."""
    return re.findall(r'id=(evt_\w+)">', page)


def test_overview_shows_counts_duplicates_and_breached_thresholds(
    signed_in: Browser, shop: Shop
) -> None:
    shop.deliver(checkout(1), times=3)  # two duplicates
    shop.deliver(customer_created(2))
    shop.process()
    shop.fail(3)

    page = signed_in.get("/admin/").text

    assert "<h2>Thresholds breached</h2>" in page
    assert "<li>failed events: 1 (threshold 0)</li>" in page
    stripe_row = re.search(r'<th scope="row">stripe</th>(.*?)</tr>', page, re.S)
    assert stripe_row is not None
    cells = re.findall(r"<td class=\"num( breach)?\">\s*(?:<a [^>]*>)?(\d+)", stripe_row.group(1))
    by_status = dict(zip([s.value for s in Status], cells, strict=True))
    assert by_status["processed"] == ("", "2")  # the checkout and the customer
    assert by_status["failed"] == (" breach", "1")
    assert re.search(r"<dt>Failed</dt>\s*<dd class=\"breach\">1</dd>", page)
    assert re.search(r"<th scope=\"row\">last hour</th><td class=\"num\">5</td>\s*"
                     r"<td class=\"num\">2</td><td class=\"num\">40.00%</td>", page)  # fmt: skip
    points = re.search(r'<polyline [^>]*points="([^"]+)"', page)
    assert points is not None and len(points.group(1).split()) == 24
    # The customer's message was delivered: nothing waits in the outbox.
    assert re.search(r"<dt>Outbox</dt>\s*<dd>0 pending,\s+0 delivering, 0 failed</dd>", page)


def test_overview_with_nothing_breached(signed_in: Browser, shop: Shop) -> None:
    shop.deliver(checkout(1))
    shop.process()
    page = signed_in.get("/admin/").text
    assert "All checks pass" in page
    assert "breach" not in page.replace("Thresholds breached", "")


def test_overview_shows_live_workers_per_host_and_alarms_below_the_minimum(shop: Shop) -> None:
    started = datetime.now(UTC) - timedelta(hours=1)
    for name, kind, host, beat_at in (
        ("a", "worker", "web-1", datetime.now(UTC)),
        ("b", "relay", "web-1", datetime.now(UTC)),
        ("c", "worker", "web-2", datetime.now(UTC) - timedelta(minutes=5)),  # SIGKILLed
    ):
        me = Beat(name, kind, host, pid=100, started_at=started)
        shop.inbox.store.liveness.beat(me, now=beat_at, alive_for=timedelta(seconds=30))
    dashboard = dashboard_app(shop.inbox.store, TOKEN, thresholds=Thresholds(min_workers=2))
    browser = Browser(Starlette(routes=[Mount("/admin", dashboard)]))
    assert browser.sign_in().status_code == 303

    page = browser.get("/admin/").text

    assert (
        "<li>live workers: 1 (threshold: at least 2; no heartbeat within 3 intervals)</li>" in page
    )
    live = re.search(r'<p id="live-workers" class="breach">(.*?)</p>', page, re.S)
    assert live is not None
    text = re.sub(r"<[^>]+>", "", live.group(1)).split()
    assert " ".join(text) == "Live: 1 relay on web-1, 1 worker on web-1."
    groups = re.findall(
        r'<tr><td><code>(web-\d)</code></td><td>(\w+)</td><td class="num">(\d+)</td>'
        r'<td class="num[^"]*">(\d+)</td>',
        page,
    )
    assert groups == [("web-1", "relay", "1", "0"), ("web-1", "worker", "1", "0"),
                      ("web-2", "worker", "0", "1")]  # fmt: skip


def test_overview_groups_a_crash_loop_by_host_in_a_bounded_page(
    signed_in: Browser, shop: Shop
) -> None:
    """Issue 31, item 12: 3,000 rows of a crash loop (each restart a process, each SIGKILLed)
    made a 555 KB overview; the page groups them by host and kind, whatever their number."""
    now = datetime.now(UTC)
    crashed = [
        {"id": f"crash{n:05}", "kind": "worker", "host": "crash-1", "pid": 1000 + n,
         "started_at": now - timedelta(seconds=n + 2), "last_beat_at": now - timedelta(seconds=n),
         "expires_at": now - timedelta(seconds=n - 1)}
        for n in range(2, 3002)
    ]  # fmt: skip
    with shop.inbox.store.transaction() as connection:
        connection.execute(workers.insert(), crashed)
    shop.inbox.store.liveness.beat(
        Beat("alive", "worker", "web-1", 7, now), alive_for=timedelta(seconds=30)
    )

    page = signed_in.get("/admin/").text

    assert len(page.encode()) < 20_000, len(page.encode())
    groups = re.findall(
        r'<tr><td><code>([\w-]+)</code></td><td>(\w+)</td><td class="num">(\d+)</td>'
        r'<td class="num[^"]*">([\d,]+)</td>',
        page,
    )
    assert groups == [("crash-1", "worker", "0", "3,000"), ("web-1", "worker", "1", "0")]


def test_charts_per_source_over_24_hours_and_7_days(signed_in: Browser, shop: Shop) -> None:
    shop.deliver(checkout(1), times=2)
    shop.fail(2, source="connect")

    day, week = signed_in.get("/admin/charts").text, signed_in.get("/admin/charts?window=7d").text

    assert re.findall(r'<h2 id="source-\d">(\w+)</h2>', day) == ["connect", "stripe"]
    stripe = day.split(">stripe</h2>")[1]
    assert '<figcaption id="chart-2-volume-caption">Deliveries (2)</figcaption>' in stripe
    assert re.search(r"<title>\d{4}-\d\d-\d\d \d\d:00 UTC: 50.0%</title>", stripe)  # 1 of 2
    assert "Events received then, failed now (1)" in day.split(">stripe</h2>")[0]
    assert week.count("<rect ") == 2 * 2 * 28 and "Charts: 7 days, per 6 hours" in week
    assert signed_in.get("/admin/charts?window=1y").status_code == 400


def test_event_list_filters_and_searches(signed_in: Browser, shop: Shop) -> None:
    shop.deliver(checkout(1))
    shop.deliver(customer_created(2))
    shop.process()
    shop.fail(3)
    shop.fail(4, source="connect")

    assert event_ids(signed_in.get("/admin/events").text) == ["evt_4", "evt_3", "evt_2", "evt_1"]
    failed = signed_in.get("/admin/events?status=failed").text
    assert event_ids(failed) == ["evt_4", "evt_3"]
    assert "Replay all failed events matching this filter" in failed
    assert event_ids(signed_in.get("/admin/events?status=failed&source=connect").text) == ["evt_4"]
    assert event_ids(signed_in.get("/admin/events?type=customer.created").text) == ["evt_2"]
    assert event_ids(signed_in.get("/admin/events?q=evt_1").text) == ["evt_1"]
    # A payload search: a JSON path and the value there; no bulk replay offered beside it.
    by_payload = signed_in.get("/admin/events?status=failed&path=data.object.id&equals=in_3")
    assert event_ids(by_payload.text) == ["evt_3"] and 'id="search-note"' in by_payload.text
    assert "Replay all failed events" not in by_payload.text
    refused = signed_in.get("/admin/events", params={"path": "data') OR 1=1 --", "equals": "x"})
    assert refused.status_code == 400 and "letters, digits, _ and - only" in refused.text
    assert event_ids(signed_in.get("/admin/events?since=1h").text) == [
        "evt_4", "evt_3", "evt_2", "evt_1"
    ]  # fmt: skip
    assert "No events match." in signed_in.get("/admin/events?until=2000-01-01T00:00").text


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("status=lost", "unknown status &#39;lost&#39;"),
        ("since=yesterday", "not a duration"),
        ("before=garbage", "not a page cursor"),
    ],
)
def test_a_malformed_filter_is_a_400_that_says_why(
    signed_in: Browser, shop: Shop, query: str, message: str
) -> None:
    response = signed_in.get(f"/admin/events?{query}")
    assert response.status_code == 400
    assert message in response.text


def test_event_list_pages_by_keyset_newest_first(
    signed_in: Browser, shop: Shop, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("hookinbox.dashboard._pages.PAGE_SIZE", 2)
    for number in range(1, 6):
        shop.deliver(customer_created(number))

    seen: list[list[str]] = []
    path: str | None = "/admin/events?source=stripe"
    while path is not None:
        page = signed_in.get(path).text
        seen.append(event_ids(page))
        older = re.search(r'href="([^"]+)">Older', page)
        path = html.unescape(older.group(1)) if older else None

    assert seen == [["evt_5", "evt_4"], ["evt_3", "evt_2"], ["evt_1"]]


def test_event_detail_shows_body_headers_deliveries_errors_and_messages(
    signed_in: Browser, shop: Shop
) -> None:
    shop.deliver(customer_created(7), times=2)
    shop.process()
    shop.fail(8)

    processed = signed_in.get("/admin/event?source=stripe&id=evt_7")
    failed = signed_in.get("/admin/event?source=stripe&id=evt_8").text

    assert processed.status_code == 200
    page = html.unescape(processed.text)
    assert '<dd id="status">processed</dd>' in page
    assert '  "id": "evt_7",' in page  # pretty-printed, keys sorted
    assert '"stripe-signature": "t=' in page  # the stored headers
    assert "<dt>Deliveries</dt><dd>2 (last" in page
    assert '<dd id="received-via">webhook</dd>' in page
    assert page.count("<td>no</td><td>no</td>") == 1  # the first delivery
    assert page.count("<td>yes</td><td>no</td>") == 1  # the duplicate
    assert re.search(r"<td>crm</td><td>.*?</td><td>delivered</td>", page)
    assert '<dd id="status" class="breach">failed</dd>' in failed
    assert "<dt>Attempts</dt><dd>2</dd>" in failed
    assert "RuntimeError: payments API down" in failed
    # The user's frame first (the handler, in tests/cli/conftest.py), hookinbox's counted after.
    trace = html.unescape(failed.split("<h2>Last error</h2>")[1].split("</pre>")[0])
    trace = trace.split("<pre>", 1)[1]
    lines = trace.splitlines()
    assert lines[1].startswith('  File "') and lines[1].endswith(", in on_invoice")
    assert "tests/cli/conftest.py" in lines[1]
    assert re.fullmatch(r"  \(\d hookinbox frames not shown\)", lines[-1])
    assert "Next attempt" not in failed and "Next attempt" not in page  # none is due
    assert "Replay this event" in failed
    missing = signed_in.get("/admin/event?source=stripe&id=evt_none")
    assert missing.status_code == 404
    assert "no event stripe evt_none" in missing.text


def test_replay_a_failed_event_then_a_worker_processes_it(signed_in: Browser, shop: Shop) -> None:
    shop.fail(1)
    confirm = signed_in.get("/admin/event/replay?source=stripe&id=evt_1").text
    assert "It is <strong>failed</strong>" in confirm
    assert "This event was processed" not in confirm
    assert 'name="force"' not in confirm

    done = signed_in.post(
        "/admin/event/replay", data={"csrf": csrf_of(confirm), "source": "stripe", "id": "evt_1"}
    )

    assert done.status_code == 303
    assert done.headers["location"] == "/admin/event?source=stripe&id=evt_1&done=replayed"
    assert "Replayed: the event is back to pending" in signed_in.get(done.headers["location"]).text
    replayed = shop.event("evt_1")
    assert (replayed.status, replayed.attempts, replayed.attempts_since_replay) == (
        Status.PENDING,
        2,
        0,
    )
    shop.outage.on = False
    shop.catch_up()
    shop.process()
    assert shop.event("evt_1").status is Status.PROCESSED


def test_replaying_a_processed_event_says_what_it_means(signed_in: Browser, shop: Shop) -> None:
    shop.deliver(checkout(1))
    shop.process()
    confirm = signed_in.get("/admin/event/replay?source=stripe&id=evt_1").text
    assert "This event was processed." in confirm
    assert "runs its handlers\nagain" in confirm
    csrf = csrf_of(confirm)
    form = {"csrf": csrf, "source": "stripe", "id": "evt_1"}

    unconfirmed = signed_in.post("/admin/event/replay", data=form)
    assert unconfirmed.status_code == 409
    assert shop.event("evt_1").status is Status.PROCESSED

    confirmed = signed_in.post("/admin/event/replay", data={**form, "force": "1"})
    assert confirmed.status_code == 303
    assert shop.event("evt_1").status is Status.PENDING
    shop.catch_up()
    shop.process()  # the order's unique payment id absorbs the second run
    assert shop.event("evt_1").outcome == "business_duplicate"


def test_bulk_replay_shows_the_count_then_replays_the_failed_events(
    signed_in: Browser, shop: Shop
) -> None:
    shop.fail(1)
    shop.fail(2)
    shop.fail(3, source="connect")
    shop.deliver(checkout(4))
    shop.process()

    confirm = signed_in.get("/admin/replay?status=failed&source=stripe").text
    assert "<strong>2</strong> failed events match" in confirm
    assert "Replay 2 failed events" in confirm

    done = signed_in.post(
        "/admin/replay", data={"csrf": csrf_of(confirm), "status": "failed", "source": "stripe"}
    )

    assert done.status_code == 200
    assert "Replayed 2 failed events" in done.text
    assert shop.statuses() == {
        ("stripe", "evt_1"): "pending",
        ("stripe", "evt_2"): "pending",
        ("connect", "evt_3"): "failed",
        ("stripe", "evt_4"): "processed",
    }
    nothing = signed_in.get("/admin/replay?source=stripe").text
    assert "No failed events match this filter." in nothing


def test_replay_by_error_text_shows_a_dry_run_count_and_sample_then_replays_them(
    signed_in: Browser, shop: Shop
) -> None:
    fail_with(shop, {
        ("stripe", 1): "ERP timeout after 30 s",
        ("stripe", 2): "card_declined",
        ("connect", 3): "upstream Timeout",
    })  # fmt: skip

    listed = signed_in.get("/admin/events?status=failed&error=TIMEOUT").text
    assert event_ids(listed) == ["evt_3", "evt_1"]
    assert "Replay all failed events matching this filter" in listed
    confirm = signed_in.get("/admin/replay?status=failed&error=timeout").text
    assert "<strong>2</strong> failed events match (dry run" in confirm
    sample = confirm.split('id="sample"')[1].split("</table>")[0]
    assert event_ids(sample) == ["evt_3", "evt_1"] and "ERP timeout after 30 s" in sample
    assert shop.statuses()[("stripe", "evt_1")] == "failed"  # the dry run changed nothing

    done = signed_in.post(
        "/admin/replay",
        data={"csrf": csrf_of(confirm), "status": "failed", "error": "timeout", "reason": "ERP"},
    )

    assert done.status_code == 200 and "Replayed 2 failed events" in done.text
    assert shop.statuses() == {
        ("stripe", "evt_1"): "pending",
        ("stripe", "evt_2"): "failed",
        ("connect", "evt_3"): "pending",
    }
    [audit] = shop.inbox.store.operator.audit_trail("stripe", "evt_1")
    assert (audit["actor"], audit["reason"], audit["previous_status"]) == (
        "dashboard", "ERP", "failed"
    )  # fmt: skip
    refused = signed_in.get("/admin/replay?status=processed")
    assert refused.status_code == 400 and "not replayed in bulk here" in refused.text


def test_a_database_outage_is_a_503_page() -> None:
    store = Store(UNREACHABLE, auto_migrate=False)
    app = Starlette(routes=[Mount("/admin", dashboard_app(store, TOKEN))])
    browser = Browser(app)
    assert browser.sign_in().status_code == 303
    for path in ("/admin/", "/admin/events", "/admin/event?source=stripe&id=evt_1"):
        response = browser.get(path)
        assert response.status_code == 503
        assert "database unavailable" in response.text
