"""The outbox in one process: written with the handler's transaction, delivered at least once."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
import sqlalchemy as sa

from hookinbox import Event, HandlerContext, Inbox, RetryPolicy
from hookinbox._storage._schema import outbox
from hookinbox.outbox import DeliveryError, HTTPDestination, Undeliverable
from hookinbox.outbox._destinations import RETRY_AFTER_CEILING, parse_retry_after
from hookinbox.sources import Stripe
from tests.processing.conftest import checkout
from tests.support.clock import ManualClock
from tests.support.in_process import run_until_idle
from tests.support.receiver import Receiver, running_receiver
from tests.support.signing import stripe_delivery

SECRET = "whsec_outbox_tests"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with running_receiver() as receiver:
        yield receiver


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def inbox(db_url: str, receiver: Receiver, clock: ManualClock) -> Iterator[Inbox]:
    inbox = Inbox(db_url, clock=clock, outbox_retry=RetryPolicy(max_attempts=5))
    inbox.add_source(Stripe(secret=SECRET))
    inbox.add_destination(HTTPDestination("shipping", url=receiver.url, timeout=1))
    yield inbox
    inbox.close()


def deliver(inbox: Inbox, clock: ManualClock, event: dict[str, object]) -> None:
    headers, body = stripe_delivery(event, SECRET, timestamp=int(clock()))
    assert inbox.receive("stripe", headers, body).status_code == 200


def messages(inbox: Inbox) -> list[sa.RowMapping]:
    with inbox.store.engine.connect() as connection:
        return list(connection.execute(sa.select(outbox).order_by(outbox.c.id)).mappings())


def process_events_only(inbox: Inbox) -> None:
    run_until_idle(inbox, prune=False, relay=False)


def test_a_handler_that_raises_after_sending_leaves_no_message(
    inbox: Inbox, clock: ManualClock
) -> None:
    @inbox.handler("stripe", "checkout.session.completed")
    def send_then_fail(event: Event, ctx: HandlerContext) -> None:
        ctx.outbox.send("shipping", {"order": 1})
        raise RuntimeError("after the send")

    deliver(inbox, clock, checkout(1))
    process_events_only(inbox)
    assert messages(inbox) == []


def test_a_committed_handler_sends_exactly_one_message_delivered_once(
    inbox: Inbox, clock: ManualClock, receiver: Receiver
) -> None:
    @inbox.handler("stripe", "checkout.session.completed")
    def book(event: Event, ctx: HandlerContext) -> None:
        ctx.outbox.send("shipping", {"order": event.payload["data"]["object"]["payment_intent"]})

    for _ in range(3):  # three deliveries of one event: one processing, one message
        deliver(inbox, clock, checkout(1))
    process_events_only(inbox)
    [message] = messages(inbox)
    assert message["status"] == "pending"
    assert (
        message["message_key"] == "stripe:evt_1:test_a_committed_handler_sends_exactly_one"
        "_message_delivered_once.<locals>.book:1"
    )
    assert inbox.process_due() == 1  # the relay's attempt
    [message] = messages(inbox)
    assert message["status"] == "delivered" and message["attempts"] == 1
    assert receiver.tries == [(message["message_key"], {"order": "pi_1"}, "ok")]


def test_a_retried_handler_writes_the_same_key(inbox: Inbox, clock: ManualClock) -> None:
    keys: list[str] = []

    @inbox.handler("stripe", "checkout.session.completed")
    def flaky(event: Event, ctx: HandlerContext) -> None:
        keys.append(ctx.outbox.send("shipping", {"n": 1}))
        if len(keys) == 1:
            raise RuntimeError("first attempt fails after sending")

    deliver(inbox, clock, checkout(1))
    process_events_only(inbox)
    clock.advance(10)
    process_events_only(inbox)
    assert len(keys) == 2 and keys[0] == keys[1]
    assert [m["message_key"] for m in messages(inbox)] == keys[:1]


def test_an_explicit_key_is_unique_per_destination(inbox: Inbox, clock: ManualClock) -> None:
    @inbox.handler("stripe", "checkout.session.completed")
    def book(event: Event, ctx: HandlerContext) -> None:
        ctx.outbox.send("shipping", {"order": "same"}, key="order-same")

    deliver(inbox, clock, checkout(1))
    deliver(inbox, clock, checkout(2))  # another event, the same business fact
    process_events_only(inbox)
    assert [m["message_key"] for m in messages(inbox)] == ["order-same"]


@pytest.mark.parametrize("failure", ["503", "timeout", "reset", "429:0"])
def test_transient_failures_are_retried_with_the_same_key(
    inbox: Inbox, clock: ManualClock, receiver: Receiver, failure: str
) -> None:
    receiver.plan = lambda _key, attempt: failure if attempt <= 2 else "ok"

    @inbox.handler("stripe", "checkout.session.completed")
    def book(event: Event, ctx: HandlerContext) -> None:
        ctx.outbox.send("shipping", {"order": 1})

    deliver(inbox, clock, checkout(1))
    inbox.process_due()
    for _ in range(3):
        clock.advance(600)  # past any backoff
        inbox.process_due()
    [message] = messages(inbox)
    assert message["status"] == "delivered"
    assert message["attempts"] == 3
    assert [action for _, _, action in receiver.tries] == [failure, failure, "ok"]
    assert {key for key, _, _ in receiver.tries} == {message["message_key"]}
    assert list(receiver.applied) == [message["message_key"]]


def test_a_definitive_refusal_fails_the_message(
    inbox: Inbox, clock: ManualClock, receiver: Receiver
) -> None:
    receiver.plan = lambda _key, _attempt: "400"

    @inbox.handler("stripe", "checkout.session.completed")
    def book(event: Event, ctx: HandlerContext) -> None:
        ctx.outbox.send("shipping", {"order": 1})

    deliver(inbox, clock, checkout(1))
    inbox.process_due()
    clock.advance(600)
    inbox.process_due()
    [message] = messages(inbox)
    assert (message["status"], message["attempts"]) == ("failed", 1)
    assert "answered 400" in message["last_error"]


def first_try_of_one_message(inbox: Inbox, clock: ManualClock) -> tuple[float, sa.RowMapping]:
    """One event whose handler sends one message to "shipping", tried once: (time, message)."""

    @inbox.handler("stripe", "checkout.session.completed")
    def book(event: Event, ctx: HandlerContext) -> None:
        ctx.outbox.send("shipping", {"order": 1})

    deliver(inbox, clock, checkout(1))
    before = clock()
    inbox.process_due()
    [message] = messages(inbox)
    return before, message


def test_retry_after_is_honoured(inbox: Inbox, clock: ManualClock, receiver: Receiver) -> None:
    receiver.plan = lambda _key, attempt: "429:120" if attempt == 1 else "ok"
    before, message = first_try_of_one_message(inbox, clock)
    assert message["next_attempt_at"].timestamp() - before >= 119.999  # not the 5 s backoff
    clock.advance(60)
    inbox.process_due()
    assert receiver.attempts(message["message_key"]) == 1
    clock.advance(70)
    inbox.process_due()
    assert messages(inbox)[0]["status"] == "delivered"


def test_past_max_attempts_a_message_fails(
    inbox: Inbox, clock: ManualClock, receiver: Receiver
) -> None:
    receiver.plan = lambda _key, _attempt: "503"

    @inbox.handler("stripe", "checkout.session.completed")
    def book(event: Event, ctx: HandlerContext) -> None:
        ctx.outbox.send("shipping", {"order": 1})

    deliver(inbox, clock, checkout(1))
    for _ in range(8):
        inbox.process_due()
        clock.advance(5000)
    [message] = messages(inbox)
    assert (message["status"], message["attempts"]) == ("failed", 5)


def test_callable_destinations_sync_and_async(db_url: str, clock: ManualClock) -> None:
    inbox = Inbox(db_url, clock=clock)
    inbox.add_source(Stripe(secret=SECRET))
    sent: list[tuple[str, object]] = []

    @inbox.destination("email")
    def send_email(message: object) -> None:
        sent.append(("email", message.payload))  # type: ignore[attr-defined]

    @inbox.destination("sms")
    async def send_sms(message: object) -> None:
        sent.append(("sms", message.payload))  # type: ignore[attr-defined]

    @inbox.destination("fax")
    def refuse(message: object) -> None:
        raise Undeliverable("nobody has a fax")

    @inbox.handler("stripe", "checkout.session.completed")
    def notify(event: Event, ctx: HandlerContext) -> None:
        ctx.outbox.send("email", {"to": "a@example.com"})
        ctx.outbox.send("sms", {"to": "+100"})
        ctx.outbox.send("fax", {"to": "+200"})

    deliver(inbox, clock, checkout(1))
    inbox.process_due()
    assert sorted(sent) == [("email", {"to": "a@example.com"}), ("sms", {"to": "+100"})]
    statuses = {m["destination"]: m["status"] for m in messages(inbox)}
    assert statuses == {"email": "delivered", "sms": "delivered", "fax": "failed"}
    inbox.close()


def test_messages_with_one_ordering_key_go_one_at_a_time_in_order(
    inbox: Inbox, clock: ManualClock, receiver: Receiver
) -> None:
    receiver.plan = lambda key, attempt: "503" if key.endswith(":1") and attempt == 1 else "ok"

    @inbox.handler("stripe", "checkout.session.completed")
    def ship(event: Event, ctx: HandlerContext) -> None:
        ctx.outbox.send("shipping", {"step": "create"}, ordering_key="order-1")
        ctx.outbox.send("shipping", {"step": "label"}, ordering_key="order-1")
        ctx.outbox.send("shipping", {"step": "other"}, ordering_key="order-2")

    deliver(inbox, clock, checkout(1))
    inbox.process_due()
    # "create" failed once, so "label" waits behind it; "other" has its own key and went.
    assert [payload["step"] for _, payload, _ in receiver.tries] == ["create", "other"]
    clock.advance(600)
    inbox.process_due()
    steps = [payload["step"] for _, payload, _ in receiver.tries]
    assert steps == ["create", "other", "create", "label"]


def test_an_unknown_destination_is_a_handler_error(inbox: Inbox, clock: ManualClock) -> None:
    @inbox.handler("stripe", "checkout.session.completed")
    def typo(event: Event, ctx: HandlerContext) -> None:
        ctx.outbox.send("shiping", {})

    deliver(inbox, clock, checkout(1))
    process_events_only(inbox)
    event = inbox.store.get_event("stripe", "evt_1")
    assert event is not None and event.last_error is not None
    assert "no outbox destination named 'shiping'" in event.last_error


@pytest.mark.parametrize("argument", ["key", "ordering_key"])
def test_an_over_long_key_is_a_handler_error_never_a_shortened_key(
    inbox: Inbox, clock: ManualClock, argument: str
) -> None:
    """256 characters would fit no column: refused in the handler on every database, so
    MariaDB's INSERT IGNORE never gets to cut it to a prefix another message may share."""

    @inbox.handler("stripe", "checkout.session.completed")
    def too_long(event: Event, ctx: HandlerContext) -> None:
        ctx.outbox.send("shipping", {}, **{argument: "k" * 255})
        ctx.outbox.send("shipping", {}, **{argument: "k" * 256})

    deliver(inbox, clock, checkout(1))
    process_events_only(inbox)
    event = inbox.store.get_event("stripe", "evt_1")
    assert event is not None and event.last_error is not None
    assert "is 1 to 255 characters" in event.last_error
    assert messages(inbox) == []  # the 255-character one rolled back with the handler


def test_a_business_duplicate_takes_its_messages_back(db_url: str, clock: ManualClock) -> None:
    inbox = Inbox(db_url, clock=clock)
    inbox.add_source(Stripe(secret=SECRET))
    inbox.add_destination(HTTPDestination("shipping", url="http://127.0.0.1:9/none"))
    orders = sa.Table("orders", sa.MetaData(), sa.Column("payment_id", sa.String(50), unique=True))
    orders.create(inbox.store.engine)

    @inbox.handler("stripe", "checkout.session.completed", business_key="orders.payment_id")
    def book(event: Event, ctx: HandlerContext) -> None:
        ctx.outbox.send("shipping", {"event": event.id})
        ctx.db.execute(orders.insert().values(payment_id="pi_same"))

    deliver(inbox, clock, checkout(1))
    deliver(inbox, clock, checkout(2))
    process_events_only(inbox)
    assert [m["event_id"] for m in messages(inbox)] == ["evt_1"]
    inbox.close()


def test_retry_after_parsing() -> None:
    assert parse_retry_after({"retry-after": "30"}) == 30
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, now=1445412420) == 60
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


HOSTILE_RETRY_AFTER = [
    "31536000", "99999999999999999999", "9" * 5000, "Fri, 31 Dec 9999 23:59:59 GMT",
    "Wed, 21 Oct 2015 07:28:00 -0000", "Sun, 00 Xyz 0000 99:99:99 GMT", "-5", "1e400", "nan",
    "\u0665", " 12 ", "",
]  # fmt: skip
"""`Retry-After` values a hostile or broken receiver may send: huge, far, past, garbage."""


@pytest.mark.parametrize("value", HOSTILE_RETRY_AFTER)
def test_retry_after_parsing_never_raises_and_stays_bounded(value: str) -> None:
    seconds = parse_retry_after({"retry-after": value}, now=1445412420)
    assert seconds is None or 0 <= seconds <= RETRY_AFTER_CEILING


FAR = ["31536000", "99999999999999999999", "Fri, 31 Dec 9999 23:59:59 GMT"]
CAPPED = RetryPolicy(max_attempts=5, max_delay=2, jitter=0)
"""No jitter: the delay after a far `Retry-After` is exactly max_delay."""


@pytest.mark.parametrize("value", FAR)
def test_a_hostile_retry_after_is_clamped_to_the_policy(
    db_url: str, receiver: Receiver, clock: ManualClock, value: str
) -> None:
    receiver.plan = lambda _key, attempt: f"429:{value}" if attempt == 1 else "ok"
    inbox = Inbox(db_url, clock=clock, outbox_retry=CAPPED)
    inbox.add_source(Stripe(secret=SECRET))
    inbox.add_destination(HTTPDestination("shipping", url=receiver.url, timeout=1))
    before, message = first_try_of_one_message(inbox, clock)
    assert (message["status"], message["attempts"]) == ("pending", 1)
    assert message["next_attempt_at"].timestamp() - before <= 2.001  # the max_delay
    clock.advance(2.5)
    inbox.process_due()
    assert (messages(inbox)[0]["status"], messages(inbox)[0]["attempts"]) == ("delivered", 2)
    inbox.close()


@pytest.mark.parametrize("retry_after", [float("inf"), float("nan"), -1e300, "soon", 1e308])
def test_a_callable_destinations_retry_after_is_clamped(
    db_url: str, clock: ManualClock, retry_after: object
) -> None:
    inbox = Inbox(db_url, clock=clock, outbox_retry=CAPPED)
    inbox.add_source(Stripe(secret=SECRET))
    tries: list[int] = []

    @inbox.destination("mail")
    def mail(message: object) -> None:
        tries.append(1)
        if len(tries) == 1:
            raise DeliveryError("later", retry_after=retry_after)  # type: ignore[arg-type]

    @inbox.handler("stripe", "checkout.session.completed")
    def book(event: Event, ctx: HandlerContext) -> None:
        ctx.outbox.send("mail", {"order": 1})

    deliver(inbox, clock, checkout(1))
    inbox.process_due()
    assert messages(inbox)[0]["status"] == "pending"
    clock.advance(2.5)
    inbox.process_due()
    assert (messages(inbox)[0]["status"], len(tries)) == ("delivered", 2)
    inbox.close()


def test_a_crashed_relay_delivery_is_sent_again(
    inbox: Inbox, clock: ManualClock, receiver: Receiver
) -> None:
    """Leased, then the relay died: after the lease the message is pending and sent again."""

    @inbox.handler("stripe", "checkout.session.completed")
    def book(event: Event, ctx: HandlerContext) -> None:
        ctx.outbox.send("shipping", {"order": 1})

    deliver(inbox, clock, checkout(1))
    process_events_only(inbox)
    now = inbox._runtime.relay.now()
    until = now + timedelta(seconds=30)
    assert inbox.store.messages.lease(limit=5, now=now, until=until).fresh
    clock.advance(31)
    inbox.process_due()  # the next lease gives it back; it is due after a short backoff
    clock.advance(10)
    inbox.process_due()
    [message] = messages(inbox)
    assert (message["status"], message["attempts"]) == ("delivered", 2)


def test_the_relay_leases_a_batch_in_one_statement_and_keeps_ordering_keys(
    inbox: Inbox, clock: ManualClock, receiver: Receiver
) -> None:
    """The relay leases through the same queue class as the worker (`_storage/_queue.py`): every
    due message in one lease, except one that waits for an older message with its ordering
    key; then each is delivered and settled on its own."""
    from hookinbox._model import MessageStatus
    from hookinbox._records import Settlement

    @inbox.handler("stripe", "checkout.session.completed")
    def book(event: Event, ctx: HandlerContext) -> None:
        for number in range(3):
            ctx.outbox.send("shipping", {"parcel": number}, key=f"{event.id}-{number}")
        ctx.outbox.send("shipping", {"step": 1}, key=f"{event.id}-a", ordering_key="order-1")
        ctx.outbox.send("shipping", {"step": 2}, key=f"{event.id}-b", ordering_key="order-1")

    deliver(inbox, clock, checkout(1))
    process_events_only(inbox)
    relay = inbox._runtime.relay
    now = relay.now()
    batch = inbox.store.messages.lease(limit=10, now=now, until=now + timedelta(seconds=30)).fresh
    assert sorted(item.message.key for item in batch) == [
        "evt_1-0", "evt_1-1", "evt_1-2", "evt_1-a"
    ]  # fmt: skip
    assert len({item.token for item in batch}) == 1
    assert inbox.store.messages.lease(limit=10, now=now, until=now).fresh == []  # b waits
    for item in batch:
        assert inbox.store.messages.record(item, Settlement(MessageStatus.DELIVERED, now), now)
    [step_two] = inbox.store.messages.lease(limit=10, now=now, until=now).fresh
    assert step_two.message.key == "evt_1-b"  # its predecessor is delivered: due now
