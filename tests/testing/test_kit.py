"""The kit's smaller parts: `Inbox.with_settings`, the clock, the builders, what it imports."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hookinbox import ConfigurationError, Inbox, RetryPolicy, Status
from hookinbox._headers import normalize_headers
from hookinbox.sources import GitHub, Shopify, StandardWebhooks, Stripe
from hookinbox.testing import (
    Clock,
    InboxHarness,
    github_push,
    shopify_order,
    sign,
    standard_event,
    stripe_checkout_session,
    stripe_event,
    stripe_invoice,
    stripe_subscription,
)


def test_with_settings_shares_the_registry_and_keeps_the_original(tmp_path: Path) -> None:
    original = Inbox(f"sqlite:///{tmp_path / 'a.db'}", sources=[Stripe(secret="whsec_x")])
    seen: list[str] = []

    @original.handler("stripe", "*")
    def record(event: object, ctx: object) -> None:
        seen.append("ran")

    clock = Clock(1_700_000_000)
    copy = original.with_settings(
        database_url=f"sqlite:///{tmp_path / 'b.db'}",
        clock=clock,
        ack_deadline=None,
        retry=RetryPolicy(max_attempts=2),
    )
    assert copy.sources == original.sources
    assert copy.settings.database_url.endswith("b.db")
    assert original.settings.database_url.endswith("a.db")
    assert (copy.settings.clock(), copy.settings.receiver.ack_deadline) == (1_700_000_000, None)
    assert original.settings.receiver.ack_deadline == 3.0
    headers, body = sign(copy.sources["stripe"], stripe_event("x.y", {}), at=clock())
    assert copy.receive("stripe", headers, body).status_code == 200
    assert copy.process_due() == 1 and seen == ["ran"]
    assert not original.started  # the copy started, on its own database
    assert not (tmp_path / "a.db").exists()
    copy.close()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"colour": "blue"}, "takes no colour"),
        ({"ack_deadline": -1}, "ack_deadline"),
        ({"database_url": "mssql://x"}, "unsupported database"),
        ({"retry": "often"}, "retry must be a RetryPolicy"),
    ],
)
def test_with_settings_checks_what_the_constructor_checks(
    changes: dict[str, object], message: str
) -> None:
    inbox = Inbox("sqlite:///never-opened.db")
    with pytest.raises(ConfigurationError, match=message):
        inbox.with_settings(**changes)


def test_the_clock_moves_only_forward_and_only_when_told() -> None:
    clock = Clock(datetime(2030, 1, 1, tzinfo=UTC))
    start = clock()
    assert clock() == start
    assert clock.advance(timedelta(minutes=1)) == start + 60
    with pytest.raises(ValueError, match="forward"):
        clock.advance(-1)
    clock.set(0)
    assert clock() == 0


def test_the_builders_make_events_the_sources_read() -> None:
    stripe = Stripe(secret="whsec_x")
    for obj in (stripe_checkout_session(), stripe_subscription(), stripe_invoice()):
        event = stripe_event(f"{obj['object']}.updated", obj)
        headers, body = sign(stripe, event)
        identity = stripe.identify(normalize_headers(headers), body)
        assert (identity.event_id, identity.event_type) == (event["id"], event["type"])
    assert stripe_event("a.b", {}) != stripe_event("a.b", {})  # two calls, two events
    shopify = Shopify(secret="s")
    headers, body = sign(shopify, shopify_order(total_price="10.00"), topic="orders/paid")
    identity = shopify.identify(normalize_headers(headers), body)
    assert identity.event_type == "orders/paid" and identity.payload["total_price"] == "10.00"
    github = GitHub(secret="g")
    headers, body = sign(github, github_push())
    assert github.identify(normalize_headers(headers), body).payload["ref"] == "refs/heads/main"
    standard = StandardWebhooks(secret="whsec_bG9jYWwtdHJpYWwtc2VjcmV0")
    headers, body = sign(standard, standard_event("user.created", {"id": "u_1"}))
    assert standard.identify(normalize_headers(headers), body).event_type == "user.created"


@pytest.mark.slow
def test_importing_the_kit_imports_no_test_tool() -> None:
    code = (
        "import sys, hookinbox.testing; "
        "loaded = [m for m in ('pytest', '_pytest', 'hypothesis') if m in sys.modules]; "
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_harness_refuses_what_is_not_an_inbox() -> None:
    with pytest.raises(TypeError, match="takes an Inbox"):
        InboxHarness("myapp:inbox")  # type: ignore[arg-type]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_an_async_test_delivers_inside_its_event_loop(tmp_path: Path) -> None:
    inbox = Inbox("sqlite:///never-opened.db", sources=[GitHub(secret="g")])
    with InboxHarness(inbox, database_url=f"sqlite:///{tmp_path / 'h.db'}") as harness:
        answers = await harness.adeliver("github", github_push(), copies=2, concurrently=True)
        assert sorted(a.status for a in answers) == ["accepted", "duplicate"]


def test_backoff_is_waited_out_by_moving_the_clock(tmp_path: Path) -> None:
    inbox = Inbox("sqlite:///never-opened.db", sources=[GitHub(secret="g")])
    calls: list[int] = []

    @inbox.handler("github", "push")
    def flaky(event: object, ctx: Any) -> None:
        calls.append(ctx.attempt)
        if ctx.attempt < 3:
            raise RuntimeError("the API we call is down")

    retry = RetryPolicy(first_delay=60, factor=2, jitter=0)
    with InboxHarness(inbox, retry=retry) as harness:
        push = github_push()
        harness.deliver("github", push)
        assert harness.run_due() == 1 and calls == [1]
        assert harness.advance(59) == 0  # the first retry waits a minute
        assert harness.advance(1) == 1 and calls == [1, 2]
        assert harness.advance(119) == 0  # the second, two
        assert harness.advance(1) == 1 and calls == [1, 2, 3]
        delivery = harness.events().__next__()
        assert (delivery.status, delivery.attempts) == (Status.PROCESSED, 3)
