"""`hookinbox status [--check] [--json]`: figures for an operator, a health check for probes."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import timedelta

import pytest

from tests.cli.conftest import (
    Shop,
    ago,
    check_lines,
    customer_created,
    parsed,
    stale_checkout,
    when,
)
from tests.processing.conftest import checkout, subscription_update

FAILED_LINE = "failed events: 1 (threshold 0)"
STALE_LINE = "stale events held for an operator: 1 (threshold 0)"
DEADLINE_LINE = "events past their NotReady deadline: 1 (threshold 0)"


def without_age(line: str) -> str:
    return re.sub(r"\d+\.\d min old", "N min old", line)


PENDING_LINE = re.compile(r"oldest pending event is 2\d\.\d min old \(threshold 15\.0 min\)")


def test_duplicate_ratio_counts_every_delivery(shop: Shop) -> None:
    shop.deliver(checkout(1), times=3)  # one event delivered three times: two duplicates
    shop.deliver(checkout(2))
    shop.process()

    document = parsed(shop.cli("status", "--json"))

    expected = {"deliveries": 4, "duplicates": 2, "ratio": 0.5}
    assert document["duplicate_ratio"] == {
        "last hour": expected,
        "last day": expected,
        "all": expected,
    }
    assert document["events"] == [{"source": "stripe", "status": "processed", "count": 2}]
    assert (document["failed"], document["deferred"], document["stale"]) == (0, 0, 0)
    assert document["not_ready_deadline"] == 0
    assert document["oldest_pending"] is None
    assert document["breaches"] == []


def test_status_json_reports_counts_and_open_figures(shop: Shop) -> None:
    shop.miss_not_ready_deadline(1, payment="pi_never")  # received 3 days ago: not in "last day"
    shop.fail(2)
    shop.fail(3, source="connect")
    shop.deliver(checkout(4), times=2)
    shop.deliver(customer_created(5))
    shop.deliver(subscription_update(6, payment="pi_later"))
    shop.process()  # 4 processed, 5 unhandled, 6 deferred
    shop.deliver(stale_checkout(7))
    shop.deliver(checkout(8))  # left pending, then aged past the 15 minutes
    oldest_pending = ago(minutes=20)
    shop.set_received_at(["evt_8"], oldest_pending)
    deferred_since = shop.event("evt_6").deferred_since

    json_result, table, check = shop.cli_all(
        ["status", "--json"], ["status"], ["status", "--check", "--json"]
    )

    document = parsed(json_result)
    assert document["events"] == [
        {"source": "connect", "status": "failed", "count": 1},
        {"source": "stripe", "status": "deferred", "count": 1},
        {"source": "stripe", "status": "failed", "count": 2},
        {"source": "stripe", "status": "pending", "count": 1},
        {"source": "stripe", "status": "processed", "count": 1},
        {"source": "stripe", "status": "stale", "count": 1},
        {"source": "stripe", "status": "unhandled", "count": 1},
    ]
    # 9 deliveries (evt_4 twice) of which 1 duplicate; evt_1's came 3 days ago
    assert document["duplicate_ratio"]["all"] == {"deliveries": 9, "duplicates": 1, "ratio": 1 / 9}
    assert document["duplicate_ratio"]["last day"] == {
        "deliveries": 8,
        "duplicates": 1,
        "ratio": 1 / 8,
    }
    assert document["failed"] == 3  # the missed deadline is a failure too
    assert document["not_ready_deadline"] == 1
    assert document["deferred"] == 1
    assert document["stale"] == 1
    assert abs(when(document["oldest_pending"]) - oldest_pending) < timedelta(seconds=1)
    assert when(document["oldest_deferred"]) == deferred_since
    assert len(document["breaches"]) == 4

    assert table.returncode == 0, table.stderr  # without --check, breaches do not fail it
    assert "Events by source and status" in table.stdout
    assert "Duplicate deliveries" in table.stdout
    assert "connect" in table.stdout
    # Separate runs, a moment apart: the pending age may differ in its last digit.
    assert [
        without_age(line) for line in table.stderr.splitlines() if line.startswith("breach:")
    ] == [without_age(f"breach: {line}") for line in document["breaches"]]

    assert (check.returncode, check.stderr) == (1, "")  # --check --json fails with its document
    report = json.loads(check.stdout)
    assert report["ok"] is False
    assert [without_age(b) for b in report["breaches"]] == [
        without_age(b) for b in document["breaches"]
    ]
    assert report["breaches"][0] == "failed events: 3 (threshold 0)"
    assert PENDING_LINE.fullmatch(report["breaches"][1])
    assert report["breaches"][2:] == [DEADLINE_LINE, STALE_LINE]


def test_check_passes_on_a_healthy_inbox(shop: Shop) -> None:
    shop.deliver(checkout(1))
    shop.deliver(subscription_update(2, payment="pi_later"))  # waiting for its order is fine
    shop.process()
    shop.deliver(checkout(3))  # pending, but only just received

    text, as_json = shop.cli_all(["status", "--check"], ["status", "--check", "--json"])

    assert check_lines(text, 0) == ["ok"]
    assert parsed(as_json) == {"ok": True, "breaches": []}


def _failed(shop: Shop) -> None:
    shop.fail(1)


def _stale(shop: Shop) -> None:
    shop.deliver(stale_checkout(1))


def _pending_too_long(shop: Shop) -> None:
    shop.deliver(checkout(1))  # never processed; received 20 minutes ago (an UPDATE)
    shop.set_received_at(["evt_1"], ago(minutes=20))


@pytest.mark.parametrize(
    ("breach", "line", "raised"),
    [
        (_failed, FAILED_LINE, ["--max-failed", "1"]),
        (_stale, STALE_LINE, ["--max-stale", "1"]),
        (_pending_too_long, PENDING_LINE, ["--max-pending-age", "30m"]),
    ],
    ids=["failed", "stale", "pending-age"],
)
def test_check_prints_one_line_per_breached_threshold(
    shop: Shop, breach: Callable[[Shop], None], line: str | re.Pattern[str], raised: list[str]
) -> None:
    breach(shop)

    breached, passing = shop.cli_all(["status", "--check"], ["status", "--check", *raised])

    [only] = check_lines(breached, 1)
    assert line.fullmatch(only) if isinstance(line, re.Pattern) else only == line
    assert check_lines(passing, 0) == ["ok"]


def test_check_a_missed_not_ready_deadline(shop: Shop) -> None:
    shop.miss_not_ready_deadline(1, payment="pi_never")  # also a failed event: two thresholds

    both, deadline_only, passing = shop.cli_all(
        ["status", "--check"],
        ["status", "--check", "--max-failed", "1"],
        ["status", "--check", "--max-failed", "1", "--max-not-ready-deadline", "1"],
    )

    assert check_lines(both, 1) == [FAILED_LINE, DEADLINE_LINE]
    assert check_lines(deadline_only, 1) == [DEADLINE_LINE]
    assert check_lines(passing, 0) == ["ok"]
