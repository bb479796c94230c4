"""`hookinbox reconcile [APP] SOURCE`: counts, --json, --dry-run, --since, and each refusal as
one line (exit 1 for the API's, 2 for usage), against the loopback imitation of Stripe's API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from hookinbox import Inbox
from hookinbox.testing import FakeStripeAPI
from tests.apps import reconciling
from tests.cli.conftest import error_line, parsed
from tests.support.hostile import MIB, Huge, dripping
from tests.support.listed import STRIPE_KEY, stripe_listed
from tests.support.loopback import Loopback, serving
from tests.support.server import ROOT, hookinbox_command, run_cli
from tests.support.signing import stripe_delivery

APP = "tests.apps.reconciling:inbox"


@pytest.fixture
def api() -> FakeStripeAPI:
    now = int(time.time())
    return FakeStripeAPI(
        [stripe_listed(n, now - 600 + n) for n in range(120)]
        + [stripe_listed(500, now - 60, "customer.created")]
    )


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


def reconcile(
    server: Loopback, db_url: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return run_cli(
        "reconcile", APP, *args, "--database-url", db_url,
        env={"RECONCILE_STRIPE_API": server.url, **(env or {})}, timeout=60,
    )  # fmt: skip


def test_json_counts_then_nothing_more(
    inbox: Inbox, server: Loopback, db_url: str, api: FakeStripeAPI
) -> None:
    headers, body = stripe_delivery(api.events[0], reconciling.SECRET)
    assert inbox.receive("stripe", headers, body).ok
    dry = parsed(reconcile(server, db_url, "stripe", "--dry-run", "--json"))
    assert {
        k: dry[k] for k in ("listed", "already_stored", "missing", "stored", "skipped_types")
    } == {"listed": 121, "already_stored": 1, "missing": 119, "stored": 0, "skipped_types": 1}
    assert dry["dry_run"] is True and dry["source"] == "stripe" and dry["clamped"] is False
    first = parsed(reconcile(server, db_url, "stripe", "--json"))
    assert (first["missing"], first["stored"], first["already_stored"]) == (119, 119, 1)
    second = parsed(reconcile(server, db_url, "stripe", "--json"))
    assert (second["missing"], second["stored"], second["already_stored"]) == (0, 0, 120)
    shown = parsed(run_cli("events", "show", APP, "stripe", api.events[5]["id"],
                           "--database-url", db_url, "--json"))  # fmt: skip
    assert shown["received_via"] == "reconcile" and shown["deliveries"] == []
    assert shown["delivery_count"] == 0 and shown["body"] == api.events[5]
    listed = parsed(run_cli("events", "list", APP, "--database-url", db_url, "--json",
                            "--limit", "500"))  # fmt: skip
    assert {row["received_via"] for row in listed} == {"webhook", "reconcile"}


def test_text_output_warns_of_lost_deliveries(inbox: Inbox, server: Loopback, db_url: str) -> None:
    result = reconcile(server, db_url, "stripe", "--since", "90m")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("stripe: listed 121, already stored 0, missing 120, stored 120")
    assert "warning: 120 event(s) had never arrived" in result.stderr


def test_since_past_the_window_is_clamped_with_a_warning(
    inbox: Inbox, server: Loopback, db_url: str, api: FakeStripeAPI
) -> None:
    result = reconcile(server, db_url, "stripe", "--since", "45d", "--json")
    assert parsed(result)["clamped"] is True
    assert "warning: --since 45d is past" in result.stderr
    assert int(api.queries[0]["created[gte]"]) >= int(time.time()) - 30 * 86400 - 60


def test_a_refused_key_is_one_line_exit_1_nothing_stored(
    inbox: Inbox, server: Loopback, db_url: str, api: FakeStripeAPI
) -> None:
    api.api_key = "sk_test_another_key"
    line = error_line(reconcile(server, db_url, "stripe"), 1)
    assert "refused the API key (401)" in line and STRIPE_KEY not in line
    as_json = reconcile(server, db_url, "stripe", "--json")
    assert as_json.returncode == 1 and "Traceback" not in as_json.stderr
    assert "refused the API key" in json.loads(as_json.stdout)["error"]
    assert STRIPE_KEY not in as_json.stdout + as_json.stderr
    assert inbox.store.operator.all_events() == []


def test_an_api_that_keeps_failing_is_one_line_exit_1(
    inbox: Inbox, server: Loopback, db_url: str, api: FakeStripeAPI
) -> None:
    api.faults += [(429, {"Retry-After": "0"})] * 5
    assert "kept answering 429" in error_line(reconcile(server, db_url, "stripe"), 1)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("stripe", "--since", "3"), "has no unit"),
        (("stripe", "--since", "-3d"), "not a positive duration"),
        (("stripe", "--since", "xd"), "not a duration"),
        (("strpe",), "did you mean 'stripe'"),
        ((), "give APP (or set HOOKINBOX_APP)"),  # APP alone is read as SOURCE
    ],
)
def test_bad_usage_is_one_line_exit_2(
    inbox: Inbox, server: Loopback, db_url: str, args: tuple[str, ...], expected: str
) -> None:
    assert expected in error_line(reconcile(server, db_url, *args), 2)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--page-timeout", "0s"), "not a positive duration"),
        (("--run-timeout", "30"), "has no unit"),
        (("--max-pages", "0"), "0 is not in the range 1<=x<=1000000"),
    ],
)
def test_bad_limits_are_one_line_exit_2(
    inbox: Inbox, server: Loopback, db_url: str, args: tuple[str, ...], expected: str
) -> None:
    assert expected in error_line(reconcile(server, db_url, "stripe", *args), 2)


def test_worker_reconcile_every_needs_a_unit(inbox: Inbox, server: Loopback, db_url: str) -> None:
    result = run_cli("worker", APP, "--reconcile-every", "5", "--database-url", db_url)
    assert "has no unit" in error_line(result, 2)
    for flag in ("--reconcile-timeout", "--reconcile-page-timeout"):
        result = run_cli("worker", APP, "--reconcile-every", "1h", flag, "5",
                         "--database-url", db_url)  # fmt: skip
        assert "has no unit" in error_line(result, 2)


def test_a_cursor_that_does_not_move_is_one_line_exit_1_and_what_was_stored_stays(
    inbox: Inbox, server: Loopback, db_url: str, api: FakeStripeAPI
) -> None:
    api.stuck = True  # has_more, and the first page again whatever starting_after says
    line = error_line(reconcile(server, db_url, "stripe"), 1)
    assert "did not move" in line and "after 2 pages" in line, line
    assert len(api.queries) == 2
    assert len(inbox.store.operator.all_events()) == 99  # the first page (one a skipped type)
    as_json = reconcile(server, db_url, "stripe", "--json")
    assert as_json.returncode == 1 and "did not move" in json.loads(as_json.stdout)["error"]


def test_pages_past_max_pages_are_never_asked(
    inbox: Inbox, server: Loopback, db_url: str, api: FakeStripeAPI
) -> None:
    line = error_line(reconcile(server, db_url, "stripe", "--max-pages", "1"), 1)
    assert "more than 1 page" in line and len(api.queries) == 1
    counts = parsed(reconcile(server, db_url, "stripe", "--max-pages", "2", "--json"))
    assert counts["listed"] == 121


def test_a_page_that_drips_stops_at_the_page_timeout(
    inbox: Inbox, server: Loopback, db_url: str, api: FakeStripeAPI
) -> None:
    api.answer = lambda: dripping(every=0.3)
    started = time.monotonic()
    line = error_line(reconcile(server, db_url, "stripe", "--page-timeout", "2s"), 1)
    assert "a page took longer than 2 s" in line
    assert time.monotonic() - started < 2 + 8  # the deadline (and the process's start)


def test_a_run_stops_at_the_run_timeout(
    inbox: Inbox, server: Loopback, db_url: str, api: FakeStripeAPI
) -> None:
    api.endless = True
    line = error_line(reconcile(server, db_url, "stripe", "--run-timeout", "2s"), 1)
    assert "the run took longer than 2 s" in line and "stored stays stored" in line


def test_listed_events_not_asked_for_are_counted_and_warned_of(
    inbox: Inbox, server: Loopback, db_url: str, api: FakeStripeAPI
) -> None:
    now = int(time.time())
    api.unfiltered = True
    api.events += [stripe_listed(900, now + 10 * 365 * 86400), stripe_listed(901, 86400),
                   {**stripe_listed(902, now - 5), "account": "acct_1Other"},
                   {**stripe_listed(903, now - 5), "object": "charge"}]  # fmt: skip
    counts = parsed(reconcile(server, db_url, "stripe", "--json"))
    assert {key: counts[key] for key in counts if key.startswith("skipped")} == {
        "skipped_outside_window": 2, "skipped_other_accounts": 1, "skipped_not_events": 1,
        "skipped_bad_ids": 0, "skipped_types": 1,
    }  # fmt: skip
    assert (counts["listed"], counts["stored"]) == (125, 120)
    text = reconcile(server, db_url, "stripe")
    assert text.returncode == 0, text.stderr
    assert "skipped outside window 2, skipped other accounts 1, skipped not events 1" in text.stdout
    assert (
        "warning: the API listed 4 item(s) that were not asked for (2 outside the window, "
        "1 of another account, 1 not an event): skipped, not stored"
    ) in text.stderr


PEAK_LAUNCHER = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
print(usage.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(status))
"""
"""Runs a command and prints its peak resident memory (KiB), exiting with its status."""


def test_an_answer_past_the_limit_is_cut_with_the_memory_it_needs(
    inbox: Inbox, server: Loopback, db_url: str, api: FakeStripeAPI
) -> None:
    """300 MiB answered to a page: refused as too large once 16 MiB are read, and the
    process's peak memory (its own, from wait4) stays far below the answer's size."""
    huge = Huge(300 * MIB)
    api.answer = huge.answer
    # Started by a small launcher that reports the command's peak: a child of this (large)
    # test process would be charged this process's own peak, which exec carries over into
    # the child's `ru_maxrss` (it grew with the suite: 270, then 308 MiB in full runs).
    command = hookinbox_command("reconcile", APP, "stripe", "--database-url", db_url)
    process = subprocess.run(
        [sys.executable, "-c", PEAK_LAUNCHER, *command], cwd=ROOT, capture_output=True,
        env={**os.environ, "RECONCILE_STRIPE_API": server.url}, text=True, timeout=120,
    )  # fmt: skip
    assert process.returncode == 1 and "more than 16 MiB: too large" in process.stderr, process
    peak_mib = int(process.stdout.split()[-1]) / 1024  # KiB on Linux
    # Read whole, the 300 MiB answer alone is more than this (656 MiB before the limit was
    # streamed).
    assert peak_mib < 150, peak_mib
    assert huge.sent < 40 * MIB
