"""`hookinbox prune [--older-than 90d] [--dry-run] [--force]`."""

from __future__ import annotations

import re

from tests.cli.conftest import (
    APP,
    Shop,
    ago,
    customer_created,
    error_line,
    hookinbox,
    hookinbox_all,
    parsed,
    stale_checkout,
)
from tests.processing.conftest import checkout, subscription_update


def summary(verb: str, events: int, deliveries: int, retention: str) -> re.Pattern[str]:
    """The one line `prune` prints (later parts, such as other tables' counts, may follow);
    a real prune also says how long it took and its rate."""
    rate = r" in [0-9.]+ s \([0-9,]+ events/s\)" if verb == "deleted" else ""
    return re.compile(
        rf"{verb} {events} events(,| and) {deliveries} delivery log rows.*"
        rf" older than {retention}{rate}\n"
    )


def test_prune_deletes_only_done_events_past_the_retention(shop: Shop) -> None:
    shop.deliver(checkout(1), times=2)
    shop.deliver(customer_created(2))
    shop.deliver(subscription_update(4, payment="pi_later"))
    shop.deliver(checkout(7))
    shop.process()  # 1 and 7 processed, 2 unhandled, 4 deferred
    shop.fail(5)
    shop.deliver(stale_checkout(6))
    shop.deliver(checkout(3))  # pending
    # 100 days old (an UPDATE of received_at, events and delivery log): all but evt_7.
    shop.set_received_at([f"evt_{n}" for n in range(1, 7)], ago(days=100))
    before = shop.statuses()
    assert shop.delivery_count() == 8

    dry_run = shop.cli("prune", "--dry-run")

    assert (dry_run.returncode, dry_run.stderr) == (0, "")
    # Old log rows go by their own time: those of the kept evt_3..evt_6 too (7 of 8).
    assert summary("would delete", 2, 7, "90d").fullmatch(dry_run.stdout), dry_run.stdout
    assert shop.statuses() == before
    assert shop.delivery_count() == 8

    pruned = hookinbox("prune", APP, "--database-url", shop.db_url)  # the app's 90d

    assert (pruned.returncode, pruned.stderr) == (0, "")
    assert summary("deleted", 2, 7, "90d").fullmatch(pruned.stdout), pruned.stdout
    assert shop.statuses() == {
        ("stripe", "evt_3"): "pending",
        ("stripe", "evt_4"): "deferred",
        ("stripe", "evt_5"): "failed",
        ("stripe", "evt_6"): "stale",
        ("stripe", "evt_7"): "processed",  # done, but younger than the retention
    }
    assert shop.delivery_count() == 1  # evt_7's; the kept old events keep their counters


def test_prune_refuses_a_retention_shorter_than_a_redelivery_window(shop: Shop) -> None:
    shop.deliver(checkout(1))
    shop.process()
    shop.set_received_at(["evt_1"], ago(days=2))  # an UPDATE: two days old

    with_app, without_app = hookinbox_all(
        ["prune", APP, "--database-url", shop.db_url, "--older-than", "1d"],
        ["prune", "--database-url", shop.db_url, "--older-than", "1d"],
    )

    line = error_line(with_app, 2)
    assert "retention 1d is shorter than stripe's redelivery window (30d)" in line
    assert "--force" in line
    line = error_line(without_app, 2)
    assert "without APP the sources' redelivery windows are unknown" in line
    assert "--force" in line
    assert ("stripe", "evt_1") in shop.statuses()

    forced = hookinbox("prune", APP, "--database-url", shop.db_url, "--older-than", "1d", "--force")

    assert (forced.returncode, forced.stderr) == (0, "")
    assert summary("deleted", 1, 1, "1d").fullmatch(forced.stdout), forced.stdout
    assert shop.statuses() == {}


def test_prune_reports_counts_and_rate_as_json(shop: Shop) -> None:
    for number in range(1, 4):
        shop.deliver(checkout(number))
    shop.process()
    shop.set_received_at(["evt_1", "evt_2"], ago(days=100))

    (counted,) = hookinbox_all(["prune", APP, "--database-url", shop.db_url, "--dry-run", "--json"])
    dry_run = parsed(counted)
    pruned = parsed(hookinbox("prune", APP, "--database-url", shop.db_url, "--json"))

    assert dry_run["dry_run"] is True and dry_run["events_per_second"] is None
    assert (dry_run["events"], dry_run["deliveries"], dry_run["older_than"]) == (2, 2, "90d")
    assert (pruned["dry_run"], pruned["events"], pruned["deliveries"]) == (False, 2, 2)
    assert pruned["seconds"] >= 0 and pruned["events_per_second"] > 0
    assert set(shop.statuses()) == {("stripe", "evt_3")}
