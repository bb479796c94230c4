"""Hostile input for the public-key and token sources, end to end through the ASGI app.

Issue 47's bad input for its two new families: a JWT with `alg: none`, HS256 signed with the
provider's public key, an expired or future `iat`, a wrong `aud`, a huge token, a certificate
URL on another host, a SubscriptionConfirmation for a topic the operator did not allow, and the
provider's key host failing. Each is sent over HTTP to an inbox holding Amazon SNS, Pub/Sub
and Plaid sources whose key hosts are real HTTPS servers on loopback (named as the providers'
hosts through `tests/support/key_hosts.py`'s route): every one is answered with its
documented status (401, or 503 with `Retry-After` for an outage), nothing is stored, and no
request goes to a host outside the provider's allow-list.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from cryptography.hazmat.primitives import serialization

from hookinbox import Inbox
from hookinbox._storage._schema import events
from hookinbox.sources import AmazonSNS, GooglePubSub, Plaid
from tests.reliability._report import Trial, record
from tests.sources.test_source_amazon_sns import SIGNING, SNSHost, documented, notification
from tests.sources.test_source_amazon_sns import subscription as sns_subscription
from tests.sources.test_source_plaid import KEY as PLAID_KEY
from tests.sources.test_source_plaid import PlaidAPI
from tests.sources.test_source_plaid import token as plaid_token
from tests.sources.test_source_pubsub import ACCOUNT, AUDIENCE, GoogleKeys
from tests.sources.test_source_pubsub import BODY as PUBSUB_BODY
from tests.sources.test_source_pubsub import KEY as GOOGLE_KEY
from tests.sources.test_source_pubsub import token as google_token
from tests.support.asgi import ASGIClient
from tests.support.key_hosts import KeyHost, key_host
from tests.support.loopback import Answer, Request

TOPIC = "arn:aws:sns:us-east-1:123456789012:orders"
PLAID_BODY = json.dumps({"webhook_type": "ITEM", "webhook_code": "ERROR", "item_id": "i1"}).encode()
HOSTS = [
    "sns.us-east-1.amazonaws.com",
    "www.googleapis.com",
    "production.plaid.com",
]


@dataclass
class Hosts:
    sns: SNSHost
    google: GoogleKeys
    plaid: PlaidAPI

    def respond(self, request: Request) -> Answer:
        host = request.headers.get("host", "")
        if host.startswith("www.googleapis.com"):
            return self.google.respond(request)
        if host.startswith("production.plaid.com"):
            return self.plaid.respond(request)
        return self.sns.respond(request)


@dataclass
class World:
    inbox: Inbox
    client: ASGIClient
    host: KeyHost
    hosts: Hosts

    def post(self, source: str, headers: dict[str, str], body: bytes) -> Any:
        return self.client.post(f"/webhooks/{source}", headers=headers, content=body)

    def stored(self) -> int:
        with self.inbox.store.engine.connect() as connection:
            return int(connection.execute(sa.select(sa.func.count()).select_from(events)).scalar())


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    hosts = Hosts(SNSHost(), GoogleKeys(), PlaidAPI())
    with key_host(tmp_path, HOSTS, hosts.respond) as host:
        inbox = Inbox(f"sqlite:///{tmp_path}/hostile.db")
        inbox.add_source(AmazonSNS(topics=[TOPIC], transport=host.route))
        inbox.add_source(
            GooglePubSub(audience=AUDIENCE, service_account=ACCOUNT, transport=host.route)
        )
        inbox.add_source(Plaid(client_id="client-1", secret="secret-1", transport=host.route))
        inbox.migrate()
        yield World(inbox, ASGIClient(inbox.asgi()), host, hosts)
        inbox.close()


def _sns(message: dict[str, str]) -> tuple[str, dict[str, str], bytes]:
    return "sns", {"x-amz-sns-message-type": message["Type"]}, json.dumps(message).encode()


def _pubsub(bearer: str) -> tuple[str, dict[str, str], bytes]:
    return "pubsub", {"authorization": f"Bearer {bearer}"}, PUBSUB_BODY


def _plaid(bearer: str) -> tuple[str, dict[str, str], bytes]:
    return "plaid", {"plaid-verification": bearer}, PLAID_BODY


def _public_pem(key: Any) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _sns_signed_elsewhere() -> dict[str, str]:
    return documented(notification(SigningCertURL=_LOOK_ALIKE), SIGNING.key)


_LOOK_ALIKE = "https://sns.us-east-1.amazonaws.com.evil.com/SimpleNotificationService-x.pem"


def _cases(now: int) -> list[tuple[str, Callable[[], tuple[str, dict[str, str], bytes]]]]:
    def google(**claims: Any) -> str:
        return google_token({"now": now, **claims})

    return [
        ("pubsub: alg none", lambda: _pubsub(google_token({"now": now}, header={"alg": "none"}))),
        ("pubsub: HS256 with Google's public key",
         lambda: _pubsub(google_token({"now": now}, secret=_public_pem(GOOGLE_KEY)))),
        ("pubsub: expired", lambda: _pubsub(google(exp=now - 3600, iat=now - 7200))),
        ("pubsub: iat in the future", lambda: _pubsub(google(iat=now + 600, exp=now + 4200))),
        ("pubsub: wrong aud", lambda: _pubsub(google(aud="https://elsewhere.example/push"))),
        ("pubsub: huge token", lambda: _pubsub(google(padding="x" * 8000))),
        ("plaid: alg none",
         lambda: _plaid(plaid_token(PLAID_BODY, iat=now, header={"alg": "none"}))),
        ("plaid: HS256 with Plaid's public key",
         lambda: _plaid(plaid_token(PLAID_BODY, iat=now, secret=_public_pem(PLAID_KEY)))),
        ("plaid: iat 6 minutes old", lambda: _plaid(plaid_token(PLAID_BODY, iat=now - 360))),
        ("plaid: iat in the future", lambda: _plaid(plaid_token(PLAID_BODY, iat=now + 600))),
        ("plaid: another body", lambda: _plaid(plaid_token(PLAID_BODY + b" ", iat=now))),
        ("sns: certificate URL on a look-alike host", lambda: _sns(_sns_signed_elsewhere())),
        ("sns: certificate URL over http", lambda: _sns(documented(notification(
            SigningCertURL="http://sns.us-east-1.amazonaws.com/SimpleNotificationService-x.pem"),
            SIGNING.key))),
        ("sns: SubscriptionConfirmation for a topic not allowed", lambda: _sns(documented(
            sns_subscription(topic="arn:aws:sns:us-east-1:999999999999:theirs"), SIGNING.key))),
    ]  # fmt: skip


def test_hostile_tokens_and_certificates_are_refused_and_nothing_is_stored(world: World) -> None:
    now = int(time.time())
    answers = {}
    for name, make in _cases(now):
        source, headers, body = make()
        answers[name] = world.post(source, headers, body).status_code
    refused = {name: status for name, status in answers.items() if status != 401}
    outside = [url for url in world.host.attempts if not any(h in url for h in HOSTS)]
    look_alike = [url for url in world.host.attempts if "evil" in url]
    record(
        Trial(
            fault="hostile JWTs and certificate URLs (issue 47)",
            backend="sqlite",
            deliveries=len(answers),
            doubled=world.stored() + len(refused),
            detail=f"{len(answers)} inputs, each 401, nothing stored; requests outside the "
            f"allow-lists: {len(outside) + len(look_alike)}",
        )
    )
    assert refused == {}
    assert world.stored() == 0
    assert outside == [] and look_alike == []


def test_a_failing_key_host_is_503_with_retry_after_and_nothing_is_stored(world: World) -> None:
    now = int(time.time())
    world.hosts.google.status = 500
    world.hosts.plaid.status = 502
    world.hosts.sns.status = 503
    sns_message = documented(notification(), SIGNING.key)
    for source, headers, body in (
        _pubsub(google_token({"now": now})),
        _plaid(plaid_token(PLAID_BODY, iat=now)),
        _sns(sns_message),
    ):
        answer = world.post(source, headers, body)
        assert answer.status_code == 503, (source, answer.text)
        assert int(answer.headers["retry-after"]) > 0
    assert world.stored() == 0


def test_valid_deliveries_of_each_are_stored_once(world: World) -> None:
    now = int(time.time())
    sns_message = documented(
        notification(Timestamp=time.strftime("%Y-%m-%dT%H:%M:%S.000Z")), SIGNING.key
    )
    for source, headers, body in (
        _pubsub(google_token({"now": now})),
        _plaid(plaid_token(PLAID_BODY, iat=now)),
        _sns(sns_message),
    ):
        for _ in range(2):
            assert world.post(source, headers, body).status_code == 200
    assert world.stored() == 3
