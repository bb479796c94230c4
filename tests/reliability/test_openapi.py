"""docs/openapi.yaml says what the server answers, and the server answers nothing else.

What it proves:
- the document loads as OpenAPI 3 (schemathesis's loader) and names exactly the paths the app
  serves;
- every `Outcome` of the receiver is listed under exactly the statuses the document gives it
  (`x-outcomes`), and each outcome, produced for real, comes back with one of those statuses,
  the documented headers and a body of the documented shape: on a real `hookinbox serve`
  (accepted, duplicate, invalid_signature, bad_request, unknown_source, too_large, timeout,
  405) or, for what a healthy server cannot be made to answer on demand (the database
  unreachable, an inline handler raising, a source ignoring or handshaking, a bug), through
  the same ASGI app in process;
- schemathesis, generating requests for every operation from the document (unsigned, to
  random sources, and validly signed bodies to a real source), finds no answer outside the
  document, no 5xx, and the server alive at the end; only the signed events answered 200
  are stored.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.core import NOT_SET
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from hookinbox import Event, HandlerContext, Inbox, Outcome
from hookinbox._errors import DeliveryIgnored
from hookinbox.claims._receiver import IN_PROGRESS_STATUSES
from hookinbox.http._app import WebhookApp
from hookinbox.http._probes import PROBES, Probes
from hookinbox.sources import Slack, Stripe
from hookinbox.sources._identity import Identity
from hookinbox.sources._signatures import Headers
from tests.reliability._hostile_server import (
    Server,
    hostile_server,
    migrated_sqlite_url,
    stored_keys,
    stripe_signature,
)
from tests.reliability._raw_http import exchange, request_head
from tests.reliability._report import Trial, record
from tests.support.asgi import ASGIClient
from tests.support.signing import slack_delivery, stripe_delivery, stripe_event

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = ROOT / "docs" / "openapi.yaml"
DELIVERY = "/webhooks/{source}"
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
EXAMPLES = 50
BODY_TIMEOUT = 1.0

schema = schemathesis.openapi.from_path(str(DOCUMENT))
deliver_operation = schema[DELIVERY]["POST"]


def responses() -> dict[str, Any]:
    raw: dict[str, Any] = schema.raw_schema
    answers: dict[str, Any] = raw["paths"][DELIVERY]["post"]["responses"]
    return answers


def documented_outcomes() -> dict[str, set[int]]:
    """Each outcome, with every status the document lists it under."""
    outcomes: dict[str, set[int]] = {}
    for status, response in responses().items():
        for outcome in response["x-outcomes"]:
            outcomes.setdefault(outcome, set()).add(int(status))
    return outcomes


def outcome_of(status: int, body: dict[str, Any]) -> str:
    """The outcome an answer names: in `error` for a refusal, in `status` otherwise."""
    if "challenge" in body:
        return Outcome.HANDSHAKE.value
    if body.get("status") == "error":
        return Outcome.ERROR.value
    return str(body["error"] if body.get("status") in ("rejected", "retry") else body["status"])


def check_against_document(
    source: str, response: httpx.Response | requests.Response, expected: Outcome
) -> None:
    """The answer is the documented one for `expected`: status, headers, body shape."""
    case = deliver_operation.Case(path_parameters={"source": source})
    case.validate_response(response, checks=CHECKS[1:])  # 500 is documented: allowed here
    outcome = outcome_of(response.status_code, response.json())
    assert outcome == expected.value, response.text
    assert response.status_code in documented_outcomes()[outcome]


# -- the document itself -------------------------------------------------------------------


def test_the_document_is_openapi_and_names_the_served_paths(tmp_path: Path) -> None:
    raw = schema.raw_schema
    assert str(raw["openapi"]).startswith("3.")
    operations = {(op.ok().method.upper(), op.ok().path) for op in schema.get_all_operations()}
    inbox = Inbox(f"sqlite:///{tmp_path / 'inbox.db'}")
    app = inbox.asgi()
    assert isinstance(app, WebhookApp) and isinstance(app.fallback, Probes)
    probes = {("GET", f"/{name}") for name in PROBES}
    inbox.close()
    delivery = app.prefix + "{source}"  # POST, and GET for a source's handshake
    assert operations == {("POST", delivery), ("GET", delivery), *probes}
    assert ("POST", DELIVERY) in operations


def test_every_outcome_is_documented_and_nothing_else() -> None:
    outcomes = documented_outcomes()
    assert set(outcomes) == {outcome.value for outcome in Outcome}
    assert outcomes[Outcome.IN_PROGRESS.value] == set(IN_PROGRESS_STATUSES)
    rejections = responses()["400"]["content"]["application/json"]["schema"]["$ref"]
    error_enum = schema.raw_schema["components"]["schemas"][rejections.rsplit("/", 1)[1]]
    refused = {
        outcome
        for outcome, statuses in outcomes.items()
        if statuses & {400, 401, 404, 408, 413, 503}
    } - {Outcome.NOT_PROCESSED.value}
    assert set(error_enum["properties"]["error"]["enum"]) == refused


# -- outcomes produced for real ------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    url = migrated_sqlite_url(tmp_path_factory.mktemp("openapi"))
    with hostile_server(url, body_timeout=BODY_TIMEOUT) as running:
        yield running, url


def post(base_url: str, source: str, body: bytes, headers: dict[str, str]) -> requests.Response:
    return requests.post(f"{base_url}/webhooks/{source}", data=body, headers=headers, timeout=30)


def test_a_live_server_answers_each_outcome_as_documented(server: tuple[Server, str]) -> None:
    running, _ = server
    base = running.base_url
    body = json.dumps(stripe_event("evt_openapi_live")).encode()
    signed = {"Stripe-Signature": stripe_signature(body)[1].decode()}
    check_against_document("stripe", post(base, "stripe", body, signed), Outcome.ACCEPTED)
    check_against_document("stripe", post(base, "stripe", body, signed), Outcome.DUPLICATE)
    unsigned = post(base, "stripe", body, {})
    check_against_document("stripe", unsigned, Outcome.INVALID_SIGNATURE)
    not_json = b"not json"
    bad = post(
        base, "stripe", not_json, {"Stripe-Signature": stripe_signature(not_json)[1].decode()}
    )
    check_against_document("stripe", bad, Outcome.BAD_REQUEST)
    check_against_document("nosuch", post(base, "nosuch", body, signed), Outcome.UNKNOWN_SOURCE)
    huge = b" " * (1024 * 1024 + 1)
    check_against_document("stripe", post(base, "stripe", huge, {}), Outcome.TOO_LARGE)

    # A body that never comes: the raw client, since a library would not send such a request.
    stalled_exchange = exchange(
        running.port,
        request_head("POST", b"/webhooks/stripe", [(b"Content-Length", b"10")]),
        timeout=BODY_TIMEOUT + 20,
    )
    stalled = stalled_exchange.response
    assert stalled is not None and stalled.status == 408
    timeout = httpx.Response(
        stalled.status,
        headers=stalled.headers,
        content=stalled.body,
        request=httpx.Request("POST", f"{base}/webhooks/stripe"),
    )
    timeout.elapsed = timedelta(seconds=stalled_exchange.seconds)
    check_against_document("stripe", timeout, Outcome.TIMEOUT)

    not_allowed = requests.get(f"{base}/webhooks/stripe", timeout=30)
    assert not_allowed.status_code == 405 and not_allowed.headers["allow"] == "POST"
    case = deliver_operation.Case(path_parameters={"source": "stripe"})
    case.validate_response(not_allowed, checks=CHECKS)
    assert running.alive()


class Ignoring(Stripe):
    """A source that finds nothing at the provider, as Mollie does for an unknown id."""

    default_name = "ignoring"

    def authenticate(self, headers: Headers, body: bytes, *, now: float) -> Identity:
        self.verify(headers, body, now=now)
        raise DeliveryIgnored()


class Broken(Stripe):
    """A source with a bug: it raises what no source may raise."""

    default_name = "broken"

    def authenticate(self, headers: Headers, body: bytes, *, now: float) -> Identity:
        raise RuntimeError("a bug")


def test_in_process_outcomes_are_answered_as_documented(tmp_path: Path) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path / 'inbox.db'}")
    secret = "whsec_in_process"
    inbox.add_source(Stripe(secret=secret, name="inline"), inline=True)
    inbox.add_source(Ignoring(secret=secret))
    inbox.add_source(Broken(secret=secret))
    inbox.add_source(Slack(secret="slack-secret"))

    @inbox.handler("inline", "checkout.session.completed")
    def fails(event: Event, ctx: HandlerContext) -> None:
        raise ValueError("the handler failed")

    client = ASGIClient(inbox.asgi())
    headers, body = stripe_delivery(stripe_event("evt_in_process"), secret)
    for source, expected in [
        ("inline", Outcome.NOT_PROCESSED),
        ("ignoring", Outcome.IGNORED),
        ("broken", Outcome.ERROR),
    ]:
        reply = client.post(f"/webhooks/{source}", content=body, headers=headers)
        check_against_document(source, reply, expected)
    slack_headers, slack_body = slack_delivery(
        {"type": "url_verification", "challenge": "c-1"}, "slack-secret"
    )
    handshake = client.post("/webhooks/slack", content=slack_body, headers=slack_headers)
    check_against_document("slack", handshake, Outcome.HANDSHAKE)
    inbox.close()

    # The database cannot be reached at all: nothing listens on port 1.
    down = Inbox("postgresql://postgres@127.0.0.1:1/nothing", auto_migrate=False)
    down.add_source(Stripe(secret=secret))
    reply = ASGIClient(down.asgi()).post("/webhooks/stripe", content=body, headers=headers)
    check_against_document("stripe", reply, Outcome.UNAVAILABLE)
    down.close()


# -- schemathesis over every operation -----------------------------------------------------


def signed_case(case: schemathesis.Case, variant: str, number: int) -> schemathesis.Case:
    """The generated body made into raw bytes and signed; or wrapped in an event first."""
    body: Any = None if case.body is NOT_SET else case.body
    raw = body if isinstance(body, bytes) else json.dumps(body, default=repr).encode()
    if variant == "signed event":
        # Ids repeat (a few per run), so duplicates are answered too.
        event = {"id": f"evt_st_{number % 7}", "type": "schemathesis", "data": body}
        raw = json.dumps(event, default=repr).encode()
    return deliver_operation.Case(
        path_parameters={"source": "stripe"},
        headers={"Stripe-Signature": stripe_signature(raw)[1].decode()},
        body=raw,
        media_type="application/octet-stream",
    )


def test_schemathesis_finds_no_undocumented_answer(server: tuple[Server, str]) -> None:
    running, database_url = server
    session = requests.Session()
    statuses: Counter[str] = Counter()
    acknowledged: set[str] = set()
    calls = 0

    def call(case: schemathesis.Case) -> None:
        nonlocal calls
        calls += 1
        response = case.call(base_url=running.base_url, session=session, timeout=30)
        statuses[f"{case.method} {response.status_code}"] += 1
        case.validate_response(response, checks=CHECKS)
        if case.method == "POST" and response.status_code == 200:
            assert case.path_parameters == {"source": "stripe"}
            acknowledged.add(response.json()["event_id"])

    bounded = settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.method.upper() != "POST":
            bounded(given(operation.as_strategy())(call))()
    # Unsigned, to any source name the document allows.
    bounded(given(deliver_operation.as_strategy())(call))()
    to_stripe = deliver_operation.as_strategy(path_parameters={"source": "stripe"})
    variants = st.sampled_from(["unsigned", "signed as is", "signed event"])

    @bounded
    @given(to_stripe, variants, st.integers(0, 10**6))
    def deliver(case: schemathesis.Case, variant: str, number: int) -> None:
        call(case if variant == "unsigned" else signed_case(case, variant, number))

    deliver()
    assert running.alive()
    stored = {key for source, key in stored_keys(database_url) if key.startswith("evt_st_")}
    assert stored == acknowledged
    assert statuses["POST 200"] and statuses["POST 401"] and statuses["POST 404"]
    record(
        Trial(
            fault="schemathesis over docs/openapi.yaml (every operation)",
            backend="sqlite",
            deliveries=calls,
            lost=len(acknowledged - stored),
            doubled=len(stored - acknowledged),
            detail="answers " + ", ".join(f"{k}x{n}" for k, n in sorted(statuses.items())),
        )
    )
