"""`hookinbox events list` and `hookinbox events show`."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hookinbox import Status
from tests.cli.conftest import DAY, Shop, customer_created, error_line, invoice, parsed, when
from tests.processing.conftest import checkout, subscription_update

LIST_FIELDS = {
    "source",
    "event_id",
    "event_type",
    "status",
    "outcome",
    "attempts",
    "attempts_before_replay",
    "deferrals",
    "delivery_count",
    "key_conflicts",
    "occurred_at",
    "received_at",
    "next_attempt_at",
    "processed_at",
    "last_delivery_at",
    "forced_replay_at",
    "received_via",
    "last_error",
}
"""The fields of an event in every JSON document (docs/cli.md, JSON output)."""


def ids(rows: list[dict[str, Any]]) -> list[str]:
    return [row["event_id"] for row in rows]


def test_list_filters_newest_first(shop: Shop) -> None:
    shop.clock.now = time.time() - 3 * DAY  # two events from three days ago
    shop.deliver(checkout(1))
    shop.process()
    shop.clock.advance(1)
    shop.fail(2, source="connect")
    shop.clock.now = time.time() - 60  # the rest from the last minute, one second apart
    for event, source in [
        (customer_created(3), "stripe"),
        (subscription_update(4, payment="pi_later"), "stripe"),
        (checkout(5), "stripe"),
        (customer_created(6), "connect"),
    ]:
        shop.deliver(event, source)
        shop.clock.advance(1)
    shop.process()
    shop.fail(7)
    four_days_ago = (datetime.now(UTC) - timedelta(days=4)).replace(tzinfo=None).isoformat()
    one_day_ago_at_plus_2 = (
        (datetime.now(UTC) - timedelta(days=1)).astimezone(timezone(timedelta(hours=2))).isoformat()
    )

    (
        everything,
        failed,
        connect,
        checkouts,
        recent,
        limited,
        naive_iso,
        aware_iso,
        table,
        empty_table,
        misspelt,
    ) = shop.cli_all(
        ["events", "list", "--json"],
        ["events", "list", "--status", "failed", "--json"],
        ["events", "list", "--source", "connect", "--json"],
        ["events", "list", "--type", "checkout.session.completed", "--json"],
        ["events", "list", "--since", "1d", "--json"],
        ["events", "list", "--limit", "2", "--json"],
        ["events", "list", "--status", "failed", "--source", "connect", "--since", four_days_ago,
         "--json"],
        ["events", "list", "--status", "unhandled", "--since", one_day_ago_at_plus_2, "--json"],
        ["events", "list", "--limit", "3"],
        ["events", "list", "--source", "stripe", "--type", "no.such.type"],
        ["events", "list", "--source", "strpe"],
    )  # fmt: skip

    rows = parsed(everything)
    assert ids(rows) == ["evt_7", "evt_6", "evt_5", "evt_4", "evt_3", "evt_2", "evt_1"]
    assert all(set(row) == LIST_FIELDS for row in rows)  # no body, no headers: `show` has them
    received = [when(row["received_at"]) for row in rows]
    assert received == sorted(received, reverse=True)
    newest = rows[0]
    assert (newest["source"], newest["event_type"], newest["status"]) == (
        "stripe",
        "invoice.paid",
        "failed",
    )
    assert (newest["attempts"], newest["outcome"], newest["delivery_count"]) == (
        2,
        "max_attempts",
        1,
    )
    assert newest["last_error"].startswith("RuntimeError: payments API down")
    assert [row["status"] for row in rows] == [
        "failed",
        "unhandled",
        "processed",
        "deferred",
        "unhandled",
        "failed",
        "processed",
    ]

    assert [(r["source"], r["event_id"]) for r in parsed(failed)] == [
        ("stripe", "evt_7"),
        ("connect", "evt_2"),
    ]
    assert ids(parsed(connect)) == ["evt_6", "evt_2"]
    assert ids(parsed(checkouts)) == ["evt_5", "evt_1"]
    assert ids(parsed(recent)) == ["evt_7", "evt_6", "evt_5", "evt_4", "evt_3"]
    assert ids(parsed(limited)) == ["evt_7", "evt_6"]
    assert ids(parsed(naive_iso)) == ["evt_2"]
    assert ids(parsed(aware_iso)) == ["evt_6", "evt_3"]

    assert table.returncode == 0, table.stderr
    assert all(f"evt_{n}" in table.stdout for n in (7, 6, 5))
    assert "evt_4" not in table.stdout
    assert (empty_table.returncode, empty_table.stdout) == (0, "")
    assert "no events match" in empty_table.stderr
    assert error_line(misspelt, 2) == "error: no source is named 'strpe' (did you mean 'stripe'?)"


def test_show_an_event_with_its_deliveries(shop: Shop) -> None:
    event = invoice(1)
    shop.deliver(event, times=2)
    changed = {**event, "data": {"object": {"id": "in_1", "amount_paid": 999}}}
    shop.deliver(changed)  # same key, another body: a duplicate and a key conflict
    shop.process()
    shop.clock.advance(10)
    shop.process()  # both attempts met the outage

    as_json, table, unknown, other_source, misspelt, listed = shop.cli_all(
        ["events", "show", "stripe", "evt_1", "--json"],
        ["events", "show", "stripe", "evt_1"],
        ["events", "show", "stripe", "evt_nope"],
        ["events", "show", "connect", "evt_1"],
        ["events", "show", "strpe", "evt_1"],
        ["events", "list", "--json"],
    )

    shown = parsed(as_json)
    # One schema: the list's fields, plus what only `show` has.
    assert set(shown) == LIST_FIELDS | {"headers", "body", "deliveries", "audit", "payload_erased"}
    assert shown["payload_erased"] is False
    assert shown["audit"] == []  # never replayed
    assert {name: shown[name] for name in LIST_FIELDS} == parsed(listed)[0]
    assert shown["body"] == event  # parsed, and the first body: the stored one
    assert (shown["source"], shown["event_id"]) == ("stripe", "evt_1")
    assert shown["event_type"] == "invoice.paid"
    assert (shown["status"], shown["outcome"], shown["attempts"]) == ("failed", "max_attempts", 2)
    assert (shown["delivery_count"], shown["key_conflicts"]) == (3, 1)
    assert shown["last_error"].startswith("RuntimeError: payments API down\n")
    assert "stripe-signature" in shown["headers"]
    assert when(shown["received_at"]) == shop.event("evt_1").received_at
    assert [(d["duplicate"], d["key_conflict"]) for d in shown["deliveries"]] == [
        (False, False),
        (True, False),
        (True, True),
    ]
    times = [when(d["received_at"]) for d in shown["deliveries"]]
    assert times == sorted(times)

    assert table.returncode == 0, table.stderr
    for text in ("last error", "RuntimeError: payments API down", "deliveries", "in_1"):
        assert text in table.stdout

    assert error_line(unknown, 1) == "error: no event stripe evt_nope"
    assert error_line(other_source, 1) == "error: no event connect evt_1"
    assert error_line(misspelt, 2) == "error: no source is named 'strpe' (did you mean 'stripe'?)"
    assert shop.event("evt_1").status is Status.FAILED  # reading changed nothing
