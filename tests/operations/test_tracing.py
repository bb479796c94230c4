"""OpenTelemetry (issue 24, item 1): one trace from the provider's request to the handler and
its outbox call, with the SDK's in-memory exporter, then once over OTLP/HTTP to a receiver on
loopback that decodes the protobuf it gets.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased
from opentelemetry.trace import SpanKind, StatusCode

from hookinbox import Event, HandlerContext, Inbox
from hookinbox._storage._schema import outbox
from hookinbox.outbox import HTTPDestination
from hookinbox.sources import Stripe
from tests.processing.conftest import checkout
from tests.support.loopback import Loopback, Request, serving
from tests.support.otel import by_name, recording
from tests.support.signing import stripe_delivery

SECRET = "whsec_tracing"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
INCOMING = f"00-{TRACE_ID}-{CALLER_SPAN}-01"
HANDLER = "handler shop.<locals>.record_order"  # the handler's qualified name


def answer(request: Request) -> tuple[int, dict[str, str], bytes]:
    return 200, {"content-type": "application/x-protobuf"}, b""


@pytest.fixture(scope="module")
def loopback() -> Iterator[Loopback]:
    with serving(answer) as server:
        yield server


def shop(tmp_path: Path, loopback: Loopback, *, fail: bool = False) -> Inbox:
    inbox = Inbox(f"sqlite:///{tmp_path / 'traced.db'}")
    inbox.add_source(Stripe(secret=SECRET))
    inbox.add_destination(HTTPDestination("crm", url=f"{loopback.url}/crm"))

    @inbox.handler("stripe", "checkout.session.completed")
    def record_order(event: Event, ctx: HandlerContext) -> None:
        if fail:
            raise RuntimeError("payments API down")
        ctx.outbox.send("crm", {"order": event.id})

    return inbox


def deliver(inbox: Inbox, number: int) -> None:
    headers, body = stripe_delivery(checkout(number), SECRET)
    reply = inbox.receive("stripe", {**headers, "traceparent": INCOMING}, body)
    assert reply.ok, reply.body


def test_one_trace_from_the_request_to_the_handler_and_its_outbox_call(
    tmp_path: Path, loopback: Loopback
) -> None:
    inbox = shop(tmp_path, loopback)
    try:
        with recording() as exported:
            deliver(inbox, 1)
            inbox.process_due()
        stored = inbox.store.get_event("stripe", "evt_1")
    finally:
        inbox.close()

    spans = by_name(exported.get_finished_spans())
    assert set(spans) == {"receive stripe", "verify", "store", "process stripe", "claim",
                          HANDLER, "send crm"}  # fmt: skip
    assert {format(s.context.trace_id, "032x") for s in spans.values()} == {TRACE_ID}
    receive, process = spans["receive stripe"], spans["process stripe"]

    def parent(name: str) -> int | None:
        link = spans[name].parent
        return None if link is None else link.span_id

    assert format(parent("receive stripe") or 0, "016x") == CALLER_SPAN  # the caller's span
    assert parent("verify") == parent("store") == receive.context.span_id
    assert parent("process stripe") == receive.context.span_id
    assert [link.context.span_id for link in process.links] == [receive.context.span_id]
    assert parent("claim") == parent(HANDLER) == process.context.span_id
    assert parent("send crm") == spans[HANDLER].context.span_id
    assert (receive.kind, process.kind, spans["send crm"].kind, spans["store"].kind) == (
        SpanKind.SERVER, SpanKind.CONSUMER, SpanKind.PRODUCER, SpanKind.CLIENT,
    )  # fmt: skip
    assert dict(receive.attributes or {}) | {"messaging.message.body.size": 0} == {
        "messaging.system": "hookinbox",
        "messaging.operation.type": "receive",
        "messaging.operation.name": "receive",
        "messaging.destination.name": "stripe",
        "messaging.message.id": "evt_1",
        "messaging.message.body.size": 0,
        "http.request.method": "POST",
        "http.response.status_code": 200,
        "hookinbox.outcome": "accepted",
        "hookinbox.event.type": "checkout.session.completed",
    }
    assert (process.attributes or {})["hookinbox.outcome"] == "processed"
    assert (spans["store"].attributes or {})["db.system.name"] == "sqlite"
    assert (spans["send crm"].attributes or {})["http.response.status_code"] == 200

    # The receive span's context went with the event, and the relay sent its own on.
    assert stored is not None
    assert stored.headers["traceparent"] == f"00-{TRACE_ID}-{receive.context.span_id:016x}-01"
    [sent] = [r for r in loopback.requests if r.path == "/crm"]
    send_id = f"{spans['send crm'].context.span_id:016x}"
    assert sent.headers["traceparent"] == f"00-{TRACE_ID}-{send_id}-01"
    assert json.loads(sent.body) == {"order": "evt_1"}


def test_a_failing_handler_marks_its_spans_and_nothing_is_stored_when_not_recording(
    tmp_path: Path, loopback: Loopback
) -> None:
    inbox = shop(tmp_path, loopback, fail=True)
    try:
        with recording() as exported:
            deliver(inbox, 1)
            inbox.process_due()
        deliver(inbox, 2)  # tracing installed, but not sampled: nothing is stored
        inbox.process_due()
        untraced = inbox.store.get_event("stripe", "evt_2")
    finally:
        inbox.close()

    spans = by_name(exported.get_finished_spans())
    handler, process = spans[HANDLER], spans["process stripe"]
    assert handler.status.status_code is StatusCode.ERROR
    assert [event.name for event in handler.events] == ["exception"]
    assert process.status.status_code is StatusCode.ERROR
    assert (process.attributes or {})["hookinbox.outcome"] == "retried"
    assert untraced is not None and "traceparent" not in untraced.headers


def test_spans_reach_an_otlp_http_receiver(tmp_path: Path, loopback: Loopback) -> None:
    exporter = OTLPSpanExporter(endpoint=f"{loopback.url}/v1/traces", timeout=5)
    inbox = shop(tmp_path, loopback)
    before = len(loopback.requests)
    try:
        with recording(also=SimpleSpanProcessor(exporter)):
            deliver(inbox, 1)
            inbox.process_due()
        with inbox.store.reading() as connection:
            kept = connection.execute(sa.select(outbox.c.trace_context)).scalar_one()
    finally:
        inbox.close()
        exporter.shutdown()

    posts = [r for r in loopback.requests[before:] if r.path == "/v1/traces"]
    assert {r.headers["content-type"] for r in posts} == {"application/x-protobuf"}
    received = {}
    for post in posts:
        request = ExportTraceServiceRequest.FromString(post.body)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                assert scope.scope.name == "hookinbox"
                for span in scope.spans:
                    received[span.name] = {a.key: a.value for a in span.attributes}
    assert set(received) >= {"receive stripe", "process stripe", HANDLER,
                             "send crm"}  # fmt: skip
    assert received["process stripe"]["messaging.message.id"].string_value == "evt_1"
    assert received["receive stripe"]["http.response.status_code"].int_value == 200
    assert json.loads(kept)["traceparent"].startswith(f"00-{TRACE_ID}-")


def forged(inbox: Inbox, number: int) -> None:
    """A delivery signed with the wrong secret, carrying a sampled `traceparent` of its own."""
    headers, body = stripe_delivery(checkout(number), "whsec_not_the_secret")
    reply = inbox.receive("stripe", {**headers, "traceparent": INCOMING}, body)
    assert reply.status_code == 401, reply.body


def test_an_unverified_request_links_to_its_trace_context_and_never_joins_it(
    tmp_path: Path, loopback: Loopback
) -> None:
    """Issue 31, item 7: whoever sends a request chooses its `traceparent`. Until the delivery
    verifies, that context is a link, not the parent: a forged request neither puts spans in a
    trace id it chose nor turns recording on through a parent-based sampler."""
    inbox = shop(tmp_path, loopback)
    try:
        with recording(sampler=ParentBased(ALWAYS_OFF)) as unsampled:
            forged(inbox, 1)
        with recording() as exported:
            forged(inbox, 2)
    finally:
        inbox.close()

    assert unsampled.get_finished_spans() == ()  # the root's sampler decided, not the request
    spans = by_name(exported.get_finished_spans())
    receive = spans["receive stripe"]
    assert receive.parent is None
    assert format(receive.context.trace_id, "032x") != TRACE_ID
    assert [(format(link.context.trace_id, "032x"), format(link.context.span_id, "016x"))
            for link in receive.links] == [(TRACE_ID, CALLER_SPAN)]  # fmt: skip
    assert spans["verify"].parent is not None
    assert spans["verify"].parent.span_id == receive.context.span_id
    assert (receive.attributes or {})["hookinbox.outcome"] == "invalid_signature"


def test_a_senders_tracestate_is_neither_stored_nor_sent_on(
    tmp_path: Path, loopback: Loopback
) -> None:
    """Issue 31, item 7: `tracestate` is vendor data of the sender's (internal host names, say):
    a verified delivery joins the sender's trace, but its `tracestate` stays out of the event's
    stored headers, the outbox message's context and the destination's request."""
    inbox = shop(tmp_path, loopback)
    before = len(loopback.requests)
    try:
        with recording() as exported:
            headers, body = stripe_delivery(checkout(1), SECRET)
            sent = {**headers, "traceparent": INCOMING, "tracestate": "corp=db-7.internal"}
            assert inbox.receive("stripe", sent, body).ok
            inbox.process_due()
        stored = inbox.store.get_event("stripe", "evt_1")
        with inbox.store.reading() as connection:
            kept = connection.execute(sa.select(outbox.c.trace_context)).scalar_one()
    finally:
        inbox.close()

    receive = by_name(exported.get_finished_spans())["receive stripe"]
    assert receive.parent is not None and format(receive.parent.span_id, "016x") == CALLER_SPAN
    assert stored is not None and "tracestate" not in stored.headers
    assert "tracestate" not in json.loads(kept)
    [request] = [r for r in loopback.requests[before:] if r.path == "/crm"]
    assert "tracestate" not in request.headers
    assert "db-7" not in json.dumps([dict(request.headers), stored.headers, kept])


@pytest.mark.slow
def test_hookinbox_imports_no_opentelemetry_until_an_event_moves() -> None:
    script = (
        "import sys, hookinbox; from hookinbox import Inbox; from hookinbox.cli import main; "
        "assert not [m for m in sys.modules if m.startswith('opentelemetry')]"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
