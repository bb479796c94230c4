"""`hookinbox replay SOURCE EVENT_ID [--force]` and `hookinbox replay --status S [filters]`."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from hookinbox import Status
from tests.apps.orders import orders
from tests.cli.conftest import DAY, Shop, error_line, fail_with, set_errors
from tests.processing.conftest import checkout, subscription_update


def order_count(shop: Shop) -> int:
    with shop.inbox.store.reading() as connection:
        return int(connection.execute(sa.select(sa.func.count()).select_from(orders)).scalar_one())


def test_replay_a_failed_event_then_a_worker_processes_it(shop: Shop) -> None:
    shop.fail(1)
    assert shop.event("evt_1").attempts == 2

    result = shop.cli("replay", "stripe", "evt_1")

    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == "stripe evt_1: failed -> pending\n"
    replayed = shop.event("evt_1")
    assert (replayed.status, replayed.attempts, replayed.outcome) == (Status.PENDING, 2, None)
    assert replayed.attempts_since_replay == 0  # attempts are history; the budget is full

    shop.outage.on = False  # the payments API is back
    shop.catch_up()  # the replay made it due at the CLI's "now"
    assert shop.process() == 1
    processed = shop.event("evt_1")
    assert (processed.status, processed.attempts) == (Status.PROCESSED, 3)


def test_a_replayed_event_gets_its_full_budget_and_its_attempts_keep_counting(shop: Shop) -> None:
    shop.fail(1)  # max_attempts (2) spent
    assert shop.cli("replay", "stripe", "evt_1").returncode == 0
    shop.catch_up()
    shop.process()
    retried = shop.event("evt_1")
    assert (retried.status, retried.attempts, retried.attempts_since_replay) == (
        Status.PENDING,
        3,
        1,
    )
    shop.clock.advance(10)  # past the retry delay, counted from the replay's first retry (5 s)
    shop.process()
    spent = shop.event("evt_1")
    assert (spent.status, spent.outcome, spent.attempts) == (Status.FAILED, "max_attempts", 4)
    listed = shop.cli("events", "list", "--json")
    [row] = [r for r in json.loads(listed.stdout) if r["event_id"] == "evt_1"]
    assert (row["attempts"], row["attempts_before_replay"]) == (4, 2)


def test_replaying_a_processed_event_needs_force(shop: Shop) -> None:
    shop.deliver(checkout(1))
    shop.process()
    assert order_count(shop) == 1

    refused = shop.cli("replay", "stripe", "evt_1")

    line = error_line(refused, 1)
    assert "stripe evt_1 is processed: replaying runs its handlers again" in line
    assert "--force" in line
    assert shop.event("evt_1").status is Status.PROCESSED

    forced = shop.cli("replay", "stripe", "evt_1", "--force")

    assert forced.returncode == 0, forced.stderr
    assert forced.stdout == "stripe evt_1: processed -> pending\n"
    replayed = shop.event("evt_1")
    assert (replayed.status, replayed.attempts, replayed.processed_at) == (Status.PENDING, 1, None)
    shop.catch_up()
    shop.process()  # the handler runs again; the order's unique payment id absorbs it
    again = shop.event("evt_1")
    assert (again.status, again.outcome) == (Status.PROCESSED, "business_duplicate")
    assert order_count(shop) == 1


def test_replay_of_an_unknown_or_held_event_fails(shop: Shop) -> None:
    shop.deliver(checkout(1))
    # Held by a worker: leased, as a worker stays inside an attempt only for milliseconds.
    now = datetime.now(UTC)
    store = shop.inbox.store
    assert store.events.lease(limit=1, now=now, until=now + timedelta(minutes=5)).fresh

    unknown, held = shop.cli_all(["replay", "stripe", "evt_nope"], ["replay", "stripe", "evt_1"])

    assert error_line(unknown, 1) == "error: no event stripe evt_nope"
    assert "stripe evt_1 is held by a worker right now" in error_line(held, 1)
    assert shop.event("evt_1").status is Status.PROCESSING


def test_bulk_replay_touches_exactly_the_matching_events(shop: Shop) -> None:
    shop.clock.now = time.time() - 3 * DAY
    shop.fail(8, source="connect")  # failed three days ago
    shop.catch_up()
    shop.fail(1)
    shop.fail(2)
    shop.fail(3, source="connect")
    shop.deliver(checkout(4))
    shop.deliver(subscription_update(5, payment="pi_later"))
    shop.process()  # 4 processed, 5 deferred
    before = shop.statuses()

    stripe_failed, refused = shop.cli_all(
        ["replay", "--status", "failed", "--source", "stripe"],
        ["replay", "--status", "processed"],
    )

    assert (stripe_failed.returncode, stripe_failed.stderr) == (0, "")
    assert stripe_failed.stdout == "replayed 2 failed events\n"
    after = shop.statuses()
    assert changed(before, after) == {
        ("stripe", "evt_1"): "pending",
        ("stripe", "evt_2"): "pending",
    }
    assert [shop.event(e).attempts_since_replay for e in ("evt_1", "evt_2")] == [0, 0]
    assert shop.event("evt_1").attempts == shop.event("evt_2").attempts == 2  # history
    assert shop.event("evt_3", "connect").attempts == 2
    line = error_line(refused, 2)
    assert "replaying processed events runs them again" in line and "--force" in line

    recent = shop.cli("replay", "--status", "failed", "--since", "1d")

    assert recent.stdout == "replayed 1 failed events\n"
    assert changed(after, shop.statuses()) == {("connect", "evt_3"): "pending"}  # not evt_8

    forced = shop.cli("replay", "--status", "processed", "--force")

    assert forced.stdout == "replayed 1 processed events\n"
    assert shop.event("evt_4").status is Status.PENDING
    assert shop.event("evt_5").status is Status.DEFERRED  # no filter ever matched it
    assert shop.event("evt_8", "connect").status is Status.FAILED

    shop.outage.on = False
    shop.catch_up()
    shop.process()
    assert shop.event("evt_1").status is Status.PROCESSED
    assert shop.event("evt_3", "connect").status is Status.PROCESSED


def changed(
    before: dict[tuple[str, str], str], after: dict[tuple[str, str], str]
) -> dict[tuple[str, str], str]:
    """The events whose status differs, with their new status."""
    return {key: status for key, status in after.items() if before.get(key) != status}


def test_bulk_replay_by_error_text_and_time_with_a_dry_run_count_and_sample(shop: Shop) -> None:
    shop.clock.now = time.time() - 3 * DAY
    shop.fail(8)  # failed three days ago
    shop.catch_up()
    set_errors(shop, {("stripe", "evt_8"): "Timeout talking to the ERP"})
    fail_with(shop, {
        ("stripe", 1): "Timeout talking to the ERP",
        ("stripe", 2): "card_declined",
        ("connect", 3): "upstream timeout (50%_done)",
    })  # fmt: skip
    before = shop.statuses()

    dry_run, literal, old, blank = shop.cli_all(
        ["replay", "--status", "failed", "--error-contains", "TIMEOUT", "--since", "1d",
         "--dry-run"],
        ["replay", "--status", "failed", "--error-contains", "50%_", "--dry-run", "--json"],
        ["replay", "--status", "failed", "--until", "1d", "--dry-run"],
        ["replay", "--status", "failed", "--error-contains", " ", "--dry-run"],
    )  # fmt: skip

    assert (dry_run.returncode, dry_run.stderr) == (0, "")
    lines = dry_run.stdout.splitlines()
    assert lines[0] == "would replay 2 failed events (dry run: nothing changed)"
    assert sorted(lines[1:]) == [
        "  connect evt_3 invoice.paid: upstream timeout (50%_done)",
        "  stripe evt_1 invoice.paid: Timeout talking to the ERP",
    ]
    # `%` and `_` are the text typed, not a pattern
    assert json.loads(literal.stdout)["sample"] == [{"source": "connect", "event_id": "evt_3"}]
    assert old.stdout.splitlines() == [
        "would replay 1 failed events (dry run: nothing changed)",
        "  stripe evt_8 invoice.paid: Timeout talking to the ERP",
    ]
    assert error_line(blank, 2) == "error: --error-contains needs some text"
    assert shop.statuses() == before

    replayed = shop.cli(
        "replay", "--status", "failed", "--error-contains", "timeout", "--since", "1d",
        "--reason", "ERP back",
    )  # fmt: skip

    assert replayed.stdout == "replayed 2 failed events\n"
    assert changed(before, shop.statuses()) == {
        ("stripe", "evt_1"): "pending",
        ("connect", "evt_3"): "pending",
    }
    operator = shop.inbox.store.operator
    for source, event_id in (("stripe", "evt_1"), ("connect", "evt_3")):
        [row] = operator.audit_trail(source, event_id)
        assert (row["action"], row["reason"], row["previous_status"]) == (
            "replay", "ERP back", "failed"
        )  # fmt: skip
    assert operator.audit_trail("stripe", "evt_2") == []
