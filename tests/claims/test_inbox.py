"""An inbox with Redis claims and no SQL database: the replies, the claims they leave, and
the configuration it refuses."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from hookinbox import ConfigurationError, Event, Inbox, NotReady
from hookinbox.claims import ClaimContext, ClaimInbox, ClaimState, RedisClaims
from hookinbox.sources import GitHub, HubSpot, Stripe
from hookinbox.testing import sign
from tests.claims.conftest import PrivateRedis
from tests.support.asgi import ASGIClient
from tests.support.server import run_cli
from tests.support.signing import stripe_delivery, stripe_event

SECRET = "whsec_test_claims_inbox"
MONTH = timedelta(days=30)  # Stripe may resend for 30 days: shorter is refused


class Effects:
    """What the handlers did, and a gate that can hold a handler mid-run."""

    def __init__(self) -> None:
        self.done: list[str] = []
        self.started = threading.Event()
        self.gate = threading.Event()
        self.gate.set()
        self.fail_next: BaseException | None = None


def build(claims: RedisClaims, effects: Effects, **options: Any) -> ClaimInbox:
    inbox = ClaimInbox(claims, **options)
    inbox.add_source(Stripe(secret=SECRET), inline=True)

    @inbox.handler("stripe", "checkout.session.completed")
    def index(event: Event, ctx: ClaimContext) -> None:
        effects.started.set()
        assert effects.gate.wait(10)
        if effects.fail_next is not None:
            error, effects.fail_next = effects.fail_next, None
            raise error
        effects.done.append(event.id)

    @inbox.handler("stripe", "invoice.paid")
    async def notify(event: Event, ctx: ClaimContext) -> None:
        ctx.log.info("async handler for %s", event.id)
        effects.done.append(f"async {event.id}")

    return inbox


@pytest.fixture
def effects() -> Effects:
    return Effects()


@pytest.fixture
def claims(redis_url: str, prefix: str) -> Iterator[RedisClaims]:
    store = RedisClaims.from_url(redis_url, prefix=prefix, retention=MONTH)
    yield store
    store.close()


@pytest.fixture
def inbox(claims: RedisClaims, effects: Effects) -> Iterator[ClaimInbox]:
    inbox = build(claims, effects)
    yield inbox
    inbox.close()


def deliver(
    inbox: ClaimInbox, event_id: str, event_type: str = "checkout.session.completed"
) -> Any:
    headers, body = stripe_delivery(stripe_event(event_id, event_type), SECRET)
    return inbox.receive("stripe", headers, body)


def test_a_new_event_runs_its_handler_once_and_is_done(
    inbox: ClaimInbox, claims: RedisClaims, effects: Effects
) -> None:
    reply = deliver(inbox, "evt_1")
    assert (reply.status_code, reply.body) == (200, {"status": "accepted", "event_id": "evt_1"})
    assert claims.state("stripe", "evt_1") is ClaimState.DONE
    again = deliver(inbox, "evt_1")
    assert (again.status_code, again.body["status"]) == (200, "duplicate")
    assert effects.done == ["evt_1"]


def test_async_handlers_run_too(inbox: ClaimInbox, effects: Effects) -> None:
    assert deliver(inbox, "evt_2", "invoice.paid").status_code == 200
    assert effects.done == ["async evt_2"]


def test_an_event_without_handlers_is_claimed_done(inbox: ClaimInbox, claims: RedisClaims) -> None:
    assert deliver(inbox, "evt_3", "customer.created").body["status"] == "accepted"
    assert claims.state("stripe", "evt_3") is ClaimState.DONE


@pytest.mark.parametrize(
    ("error", "detail"),
    [(RuntimeError("index down"), "handler raised RuntimeError"), (NotReady("later"), "not ready")],
)
def test_a_failing_handler_releases_the_claim_and_the_retry_runs(
    inbox: ClaimInbox, claims: RedisClaims, effects: Effects, error: Exception, detail: str
) -> None:
    effects.fail_next = error
    reply = deliver(inbox, "evt_1")
    assert reply.status_code == 503
    assert reply.body["error"] == "not_processed"
    assert detail in reply.body["detail"]
    assert reply.headers["retry-after"] == "5"
    assert claims.state("stripe", "evt_1") is None, "no mark of the failed try is left"
    assert effects.done == []

    retry = deliver(inbox, "evt_1")
    assert (retry.status_code, retry.body["status"]) == (200, "accepted")
    assert effects.done == ["evt_1"]


def _hold_a_delivery(inbox: ClaimInbox, effects: Effects) -> tuple[threading.Thread, list[Any]]:
    effects.gate.clear()
    replies: list[Any] = []
    first = threading.Thread(target=lambda: replies.append(deliver(inbox, "evt_1")))
    first.start()
    assert effects.started.wait(10)
    return first, replies


def test_a_copy_arriving_while_the_handler_runs_is_answered_409(
    inbox: ClaimInbox, claims: RedisClaims, effects: Effects
) -> None:
    first, replies = _hold_a_delivery(inbox, effects)
    try:
        copy = deliver(inbox, "evt_1")
        assert copy.status_code == 409
        assert copy.body["status"] == "in_progress"
        assert copy.headers["retry-after"] == "5"
        assert claims.state("stripe", "evt_1") is ClaimState.IN_PROGRESS
    finally:
        effects.gate.set()
        first.join(10)
    assert replies[0].body["status"] == "accepted"
    assert effects.done == ["evt_1"]


def test_in_progress_may_be_answered_200_duplicate(claims: RedisClaims, effects: Effects) -> None:
    inbox = build(claims, effects, in_progress_status=200)
    first, _ = _hold_a_delivery(inbox, effects)
    try:
        copy = deliver(inbox, "evt_1")
        assert (copy.status_code, copy.body["status"]) == (200, "duplicate")
    finally:
        effects.gate.set()
        first.join(10)
    assert effects.done == ["evt_1"]


def test_a_foreign_value_under_the_prefix_is_a_500_not_a_traceback(
    inbox: ClaimInbox, claims: RedisClaims, prefix: str, effects: Effects
) -> None:
    claims.client.set(f"{prefix}:stripe/evt_1", "not a claim")
    reply = deliver(inbox, "evt_1")
    assert (reply.status_code, reply.body) == (500, {"status": "error", "error": "internal"})
    assert effects.done == []


def test_a_bad_signature_claims_nothing(inbox: ClaimInbox, claims: RedisClaims) -> None:
    headers, body = stripe_delivery(stripe_event("evt_1"), "whsec_wrong")
    reply = inbox.receive("stripe", headers, body)
    assert reply.status_code == 401
    assert claims.state("stripe", "evt_1") is None


def test_redis_down_answers_503_and_runs_nothing(closed_port: int, effects: Effects) -> None:
    claims = RedisClaims.from_url(
        f"redis://127.0.0.1:{closed_port}/0", timeout=0.5, retention=MONTH
    )
    inbox = build(claims, effects)
    reply = deliver(inbox, "evt_1")
    assert reply.status_code == 503
    assert reply.body["error"] == "unavailable"
    assert "Redis is unreachable" in reply.body["detail"]
    assert effects.done == []

    client = ASGIClient(inbox.asgi())
    ready = client.get("/readyz")
    assert ready.status_code == 503
    headers, body = stripe_delivery(stripe_event("evt_1"), SECRET)
    assert client.post("/webhooks/stripe", headers=headers, content=body).status_code == 503
    assert effects.done == []


def test_redis_gone_after_the_handler_answers_200_and_logs(
    private_redis: PrivateRedis, effects: Effects, caplog: pytest.LogCaptureFixture
) -> None:
    claims = RedisClaims.from_url(private_redis.url, timeout=0.5, retention=MONTH)
    inbox = build(claims, effects)
    effects.gate.clear()
    replies: list[Any] = []
    first = threading.Thread(target=lambda: replies.append(deliver(inbox, "evt_1")))
    first.start()
    assert effects.started.wait(10)
    private_redis.stop()
    effects.gate.set()
    first.join(20)
    assert replies[0].status_code == 200, "a 503 would make the retry run the handler again"
    assert effects.done == ["evt_1"]
    assert "handlers ran but the claim could not be marked done" in caplog.text


def test_the_http_app_serves_claim_mode(inbox: ClaimInbox, redis_url: str) -> None:
    client = ASGIClient(inbox.asgi())
    assert client.get("/readyz").status_code == 200
    headers, body = stripe_delivery(stripe_event("evt_9"), SECRET)
    response = client.post("/webhooks/stripe", headers=headers, content=body)
    assert response.json() == {"status": "accepted", "event_id": "evt_9"}
    metrics = client.get("/metrics")
    assert metrics.status_code == 200
    assert "hookinbox_deliveries_total" in metrics.text
    assert "hookinbox_store_up" not in metrics.text, "no database to report on"


def test_a_claim_inbox_refuses_what_needs_a_database(claims: RedisClaims) -> None:
    inbox = ClaimInbox(claims)
    with pytest.raises(ConfigurationError, match="its sources are always inline"):
        inbox.add_source(GitHub(secret="x"), inline=False)
    with pytest.raises(ConfigurationError, match="no business_key, max_attempts or retry"):
        inbox.handler("github", "push", business_key="orders.payment_id")
    with pytest.raises(ConfigurationError, match="no business_key, max_attempts or retry"):
        inbox.handler("github", "push", max_attempts=3)
    for needs_sql in ("worker", "migrate", "prune", "store", "destination", "after_migrate"):
        assert not hasattr(inbox, needs_sql), f"a ClaimInbox has no {needs_sql}"
    with pytest.raises(ConfigurationError, match="hash tag"):
        inbox.add_source(GitHub(secret="x", name="{github}"))
    with pytest.raises(ConfigurationError, match="in_progress_status is 409"):
        ClaimInbox(claims, in_progress_status=202)
    with pytest.raises(ConfigurationError, match="in_progress_status applies to an inbox with"):
        Inbox("sqlite:///x.db", in_progress_status=200)
    with pytest.raises(ConfigurationError, match="takes a RedisClaims"):
        ClaimInbox("redis://127.0.0.1:6379/0")  # type: ignore[arg-type]
    assert "ClaimInbox(RedisClaims(prefix=" in repr(inbox)


def test_the_retention_must_cover_the_redelivery_window(redis_url: str, prefix: str) -> None:
    week = RedisClaims.from_url(redis_url, prefix=prefix)  # the default: 7 days
    with pytest.raises(ConfigurationError, match=r"retention 7d is shorter than stripe's .*30d"):
        ClaimInbox(week).add_source(Stripe(secret=SECRET))
    forced = ClaimInbox(week, allow_short_retention=True)
    forced.add_source(Stripe(secret=SECRET))
    ClaimInbox(week).add_source(GitHub(secret="x"))  # 3 days: fine
    week.close()


@pytest.mark.slow
def test_the_cli_refuses_what_needs_a_database_in_one_line() -> None:
    worker = run_cli("worker", "tests.apps.claims_app:inbox")
    assert worker.returncode == 2
    assert worker.stderr.strip() == (
        "error: tests.apps.claims_app:inbox is a ClaimInbox: it keeps no database, and this "
        "command works on an inbox's database"
    )
    served = run_cli("serve", "tests.apps.claims_app:inbox", "--database-url", "sqlite:///x.db")
    assert served.returncode == 2
    assert "a ClaimInbox keeps no SQL database: --database-url does not apply" in served.stderr


def test_a_batch_claims_its_events_in_turn_and_a_retry_skips_the_done_ones(
    claims: RedisClaims,
) -> None:
    """Redis has no transaction over handlers: the first event not handled answers for the
    batch, and the provider's retry finds the events before it done (docs/ingest.md)."""
    inbox = ClaimInbox(claims)
    hubspot = inbox.add_source(
        HubSpot(secret="batch", url="https://hooks.example.com/webhooks/hubspot"), inline=True
    )
    done: list[str] = []
    failing = {"1:2"}

    @inbox.handler("hubspot")
    def handle(event: Event, ctx: ClaimContext) -> None:
        if event.id in failing:
            raise RuntimeError("not now")
        done.append(event.id)

    events = [{"eventId": i, "subscriptionId": 1} for i in (1, 2, 3)]
    try:
        reply = inbox.receive("hubspot", *sign(hubspot, events))
        assert (reply.status_code, reply.body["error"]) == (503, "not_processed")
        assert done == ["1:1"]
        failing.clear()
        reply = inbox.receive("hubspot", *sign(hubspot, events))
        assert reply.body == {"status": "accepted", "events": 3, "accepted": 2, "duplicates": 1}
        assert done == ["1:1", "1:2", "1:3"]
    finally:
        inbox.close()
