"""Amazon SNS: AWS's canonical string, the certificate fetched from SNS hosts only, the topics.

Signatures are made by the recipe AWS documents ("Verifying the signatures of Amazon SNS
messages"), written here apart from hookinbox, with certificates made in the test; the npm
package `sns-validator` judges what the test kit signs and what the source accepts. The
certificate host is a real HTTPS server on loopback, reached as `sns.us-east-1.amazonaws.com`
through `tests/support/key_hosts.py`'s route, which records every request the source tried:
the hostile URLs must leave that list empty.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from tests.support.key_hosts import KeyHost, key_host
from tests.support.loopback import Answer, Request
from tests.support.pki import issue, make_root
from tests.testing.npm_oracles import npm_judges, oracle_dir

from hookinbox import Inbox
from hookinbox._errors import (
    BadSignature,
    ConfigurationError,
    Handshake,
    PayloadError,
    TimestampOutOfTolerance,
    VerificationUnavailable,
)
from hookinbox._headers import normalize_headers
from hookinbox.sources import AmazonSNS
from hookinbox.testing import sign, sns_test_certificate

NOW = 1_700_000_000
TOPIC = "arn:aws:sns:us-east-1:123456789012:orders"
OTHER_TOPIC = "arn:aws:sns:us-east-1:210987654321:someone-elses"
HOST = "sns.us-east-1.amazonaws.com"
CERT_PATH = "/SimpleNotificationService-0123456789abcdef.pem"
CERT_URL = f"https://{HOST}{CERT_PATH}"
SIGNING = issue(make_root("sns"), "sns.amazonaws.com")
KIT = sns_test_certificate()

NOTIFICATION_FIELDS = ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type")
SUBSCRIPTION_FIELDS = (
    "Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"
)  # fmt: skip


def documented(message: dict[str, str], key: Any, version: str = "2") -> dict[str, str]:
    """AWS's recipe: the fields present, as "name\\nvalue\\n", signed with SHA1 (version 1) or
    SHA256 (version 2) with RSA, base64."""
    order = NOTIFICATION_FIELDS if message["Type"] == "Notification" else SUBSCRIPTION_FIELDS
    text = "".join(f"{name}\n{message[name]}\n" for name in order if name in message)
    algorithm = hashes.SHA1() if version == "1" else hashes.SHA256()
    signature = key.sign(text.encode(), padding.PKCS1v15(), algorithm)
    return {
        **message,
        "SignatureVersion": version,
        "Signature": base64.b64encode(signature).decode(),
        "SigningCertURL": message.get("SigningCertURL", CERT_URL),
    }


def notification(**fields: str) -> dict[str, str]:
    return {
        "Type": "Notification",
        "MessageId": "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324",
        "TopicArn": TOPIC,
        "Subject": "order paid",
        "Message": json.dumps({"order": "ord_1", "status": "paid", "note": "café ☕"}),
        "Timestamp": "2023-11-14T22:13:20.000Z",
        **fields,
    }


def subscription(kind: str = "SubscriptionConfirmation", topic: str = TOPIC) -> dict[str, str]:
    token = "2336412f37fb687f5d51e6e241d09c805a5a57b30d712f794cc5f6a988666d92768dd60a747ba6f3"
    return {
        "Type": kind,
        "MessageId": "165545c9-2a5c-472c-8df2-7ff2be2b3b1b",
        "Token": token,
        "TopicArn": topic,
        "Message": f"You have chosen to subscribe to the topic {topic}.",
        "SubscribeURL": f"https://{HOST}/?Action=ConfirmSubscription"
        f"&TopicArn={quote(topic, safe='')}&Token={token}",
        "Timestamp": "2023-11-14T22:13:20.000Z",
    }


def body(message: dict[str, str]) -> bytes:
    return json.dumps(message).encode()


def headers(message: dict[str, str]) -> dict[str, str]:
    return {"x-amz-sns-message-type": message["Type"], "content-type": "text/plain"}


@dataclass
class SNSHost:
    """SNS's certificate host and its subscription confirmations."""

    documents: dict[str, bytes] = field(default_factory=lambda: {CERT_PATH: SIGNING.pem})
    status: int = 200
    delay: float = 0.0
    location: str | None = None
    cache_control: str | None = None

    def respond(self, request: Request) -> Answer:
        threading.Event().wait(self.delay)
        if self.location is not None:
            return 302, {"location": self.location}, b""
        if self.status != 200:
            return self.status, {}, b""
        if request.path.startswith("/?Action=ConfirmSubscription"):
            return 200, {"content-type": "text/xml"}, b"<ConfirmSubscriptionResponse/>"
        document = self.documents.get(request.path)
        if document is None:
            return 404, {}, b"<Error><Code>NoSuchKey</Code></Error>"
        extra = {"cache-control": self.cache_control} if self.cache_control else {}
        return 200, {"content-type": "application/x-x509-ca-cert", **extra}, document


@dataclass
class World:
    sns: SNSHost
    host: KeyHost

    def source(self, **options: Any) -> AmazonSNS:
        return AmazonSNS(topics=[TOPIC], transport=self.host.route, **options)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    sns = SNSHost()
    with key_host(tmp_path, [HOST, "sns.eu-west-1.amazonaws.com"], sns.respond) as host:
        yield World(sns, host)


# -- the signature ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["1", "2"])
def test_a_documented_signature_verifies_with_the_fetched_certificate(
    world: World, version: str
) -> None:
    source = world.source()
    message = documented(notification(), SIGNING.key, version)
    source.verify(normalize_headers(headers(message)), body(message), now=NOW)
    assert world.host.attempts == [CERT_URL]


def test_a_notification_without_a_subject_signs_without_it(world: World) -> None:
    message = notification()
    del message["Subject"]
    signed = documented(message, SIGNING.key)
    identity = world.source().authenticate(
        normalize_headers(headers(signed)), body(signed), now=NOW
    )
    assert identity.event_id == message["MessageId"]
    assert identity.event_type == "Notification"


@pytest.mark.parametrize(
    "spoil",
    [
        lambda m: {**m, "Message": m["Message"] + " "},
        lambda m: {**m, "Subject": "order refunded"},
        lambda m: {**m, "MessageId": "another"},
        lambda m: {**m, "Timestamp": "2023-11-14T22:13:21.000Z"},
        lambda m: {**m, "SignatureVersion": "1" if m["SignatureVersion"] == "2" else "2"},
        lambda m: {**m, "SignatureVersion": "3"},
        lambda m: {**m, "Signature": "not base64!"},
        lambda m: {k: v for k, v in m.items() if k != "Signature"},
    ],
    ids=["message", "subject", "id", "timestamp", "version", "version3", "garbage", "absent"],
)
def test_a_changed_field_is_refused(world: World, spoil: Any) -> None:
    message = spoil(documented(notification(), SIGNING.key))
    with pytest.raises(BadSignature):
        world.source().verify(normalize_headers(headers(message)), body(message), now=NOW)


def test_a_stranger_certificate_on_the_sns_host_does_not_verify_anothers_signature(
    world: World,
) -> None:
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    message = documented(notification(), stranger)
    with pytest.raises(BadSignature):
        world.source().verify(normalize_headers(headers(message)), body(message), now=NOW)


def test_the_message_type_header_must_agree_with_the_body(world: World) -> None:
    message = documented(notification(), SIGNING.key)
    wrong = {"x-amz-sns-message-type": "SubscriptionConfirmation"}
    with pytest.raises(BadSignature, match="disagree"):
        world.source().verify(normalize_headers(wrong), body(message), now=NOW)


def test_a_body_that_is_no_sns_message_is_refused_without_a_fetch(world: World) -> None:
    for raw in (b"not json", b"[]", b'{"Type": "Notification"}', b'{"Type": "Other"}'):
        with pytest.raises(BadSignature):
            world.source().verify({}, raw, now=NOW)
    assert world.host.attempts == []


def test_a_message_of_a_topic_not_allowed_is_refused_before_any_fetch(world: World) -> None:
    message = documented(notification(TopicArn=OTHER_TOPIC), SIGNING.key)
    with pytest.raises(BadSignature, match="not one of this source's topics"):
        world.source().verify(normalize_headers(headers(message)), body(message), now=NOW)
    assert world.host.attempts == []


def test_topics_must_be_given_as_arns() -> None:
    for topics in ([], "orders", ["arn:aws:sqs:us-east-1:123456789012:q"]):
        with pytest.raises(ConfigurationError, match="topics"):
            AmazonSNS(topics=topics)


def test_a_tolerance_holds_the_signed_timestamp(world: World) -> None:
    message = documented(notification(), SIGNING.key)
    source = world.source(tolerance=300)
    source.verify(normalize_headers(headers(message)), body(message), now=NOW + 300)
    with pytest.raises(TimestampOutOfTolerance, match="old"):
        source.verify(normalize_headers(headers(message)), body(message), now=NOW + 301)


# -- the certificate URL and its cache --------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://sns.us-east-1.amazonaws.com" + CERT_PATH,
        "https://sns.us-east-1.amazonaws.com.evil.com" + CERT_PATH,
        "https://evil.com/sns.us-east-1.amazonaws.com" + CERT_PATH,
        "https://sns.us-east-1.amazonaws.com@evil.com" + CERT_PATH,
        "https://user@sns.us-east-1.amazonaws.com" + CERT_PATH,
        "https://127.0.0.1" + CERT_PATH,
        "https://[::1]" + CERT_PATH,
        "https://2130706433" + CERT_PATH,
        "https://sns.us-east-1.amazonaws.com:8443" + CERT_PATH,
        "https://s3.amazonaws.com" + CERT_PATH,
        "https://sns.us-east-1.amazonaws.com./" + CERT_PATH,
        "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-x.pem?x=1",
        "https://sns.us-east-1.amazonaws.com/../SimpleNotificationService-x.pem",
        "https://sns.us-east-1.amazonaws.com/other.pem",
        "https://sns.us-east-1.amazonaws.com\\@evil.com" + CERT_PATH,
        "https://sns.us-east-1.amazonaws.com" + CERT_PATH + "#fragment",
        "file:///etc/passwd",
    ],
)
def test_a_certificate_url_off_the_sns_hosts_is_never_requested(world: World, url: str) -> None:
    message = documented(notification(SigningCertURL=url), SIGNING.key)
    with pytest.raises(BadSignature, match="SigningCertURL"):
        world.source().verify(normalize_headers(headers(message)), body(message), now=NOW)
    assert world.host.attempts == []
    assert world.host.arrived == 0


def test_a_redirect_is_not_followed(world: World) -> None:
    world.sns.location = "https://evil.example" + CERT_PATH
    message = documented(notification(), SIGNING.key)
    with pytest.raises(VerificationUnavailable, match="302"):
        world.source().verify(normalize_headers(headers(message)), body(message), now=NOW)
    assert world.host.attempts == [CERT_URL]  # the SNS host only, never the Location


def test_the_certificate_is_fetched_once_and_never_again_while_cached(world: World) -> None:
    source = world.source()
    for offset in range(0, 3600, 600):
        message = documented(notification(MessageId=f"m{offset}"), SIGNING.key)
        source.verify(normalize_headers(headers(message)), body(message), now=NOW + offset)
    assert world.host.arrived == 1


def test_a_stale_certificate_is_refreshed_in_the_background(world: World) -> None:
    world.sns.cache_control = "public, max-age=600"
    source = world.source()
    message = documented(notification(), SIGNING.key)
    source.verify(normalize_headers(headers(message)), body(message), now=NOW)
    world.sns.delay = 1.0  # the refresh is slow: the delivery must not wait for it
    started = time.monotonic()
    source.verify(normalize_headers(headers(message)), body(message), now=NOW + 601)
    assert time.monotonic() - started < 0.5
    deadline = time.monotonic() + 5
    while world.host.arrived < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert world.host.arrived == 2
    # Past twice its age the cached one is not used: fetched while the delivery waits.
    world.sns.delay = 0.0
    source.verify(normalize_headers(headers(message)), body(message), now=NOW + 601 + 1201)
    assert world.host.arrived == 3


def test_an_outage_is_503_and_is_remembered_for_a_few_seconds(world: World) -> None:
    world.sns.status = 500
    source = world.source()
    message = documented(notification(), SIGNING.key)
    for now in (NOW, NOW + 1):
        with pytest.raises(VerificationUnavailable, match="500"):
            source.verify(normalize_headers(headers(message)), body(message), now=now)
    assert world.host.arrived == 1
    world.sns.status = 200
    # Past the failure's 5 s, and the 10 s between fetches of keys never fetched.
    source.verify(normalize_headers(headers(message)), body(message), now=NOW + 11)
    assert world.host.arrived == 2


def test_a_certificate_sns_does_not_have_is_401(world: World) -> None:
    url = f"https://{HOST}/SimpleNotificationService-missing.pem"
    message = documented(notification(SigningCertURL=url), SIGNING.key)
    with pytest.raises(BadSignature, match="no key"):
        world.source().verify(normalize_headers(headers(message)), body(message), now=NOW)


def test_a_slow_or_huge_certificate_is_refused(world: World) -> None:
    message = documented(notification(), SIGNING.key)
    world.sns.delay = 1.0
    with pytest.raises(VerificationUnavailable, match="Timeout"):
        world.source(timeout=0.3).verify(
            normalize_headers(headers(message)), body(message), now=NOW
        )
    world.sns.delay = 0.0
    world.sns.documents[CERT_PATH] = b"x" * 70_000
    with pytest.raises(BadSignature, match="too large"):
        world.source().verify(normalize_headers(headers(message)), body(message), now=NOW)


def test_a_certificate_not_issued_to_sns_is_refused(world: World) -> None:
    world.sns.documents[CERT_PATH] = issue(make_root("x"), "sns.evil.example").pem
    message = documented(notification(), SIGNING.key)
    with pytest.raises(BadSignature, match="not issued to SNS"):
        world.source().verify(normalize_headers(headers(message)), body(message), now=NOW)


def test_keys_not_yet_known_are_fetched_at_a_paced_rate(world: World) -> None:
    source = world.source()
    first = documented(notification(), SIGNING.key)
    source.verify(normalize_headers(headers(first)), body(first), now=NOW)
    url = f"https://{HOST}/SimpleNotificationService-random1.pem"
    other = documented(notification(SigningCertURL=url), SIGNING.key)
    with pytest.raises(VerificationUnavailable, match="paced"):
        source.verify(normalize_headers(headers(other)), body(other), now=NOW + 1)
    assert world.host.arrived == 1


# -- subscriptions ----------------------------------------------------------------------------


def test_a_subscription_of_an_allowed_topic_is_confirmed_and_nothing_stored(
    world: World, tmp_path: Path
) -> None:
    message = documented(subscription(), SIGNING.key)
    with pytest.raises(Handshake) as answered:
        world.source().authenticate(normalize_headers(headers(message)), body(message), now=NOW)
    assert answered.value.answer == {"status": "subscription_confirmed", "topic": TOPIC}
    assert world.host.attempts == [CERT_URL, message["SubscribeURL"]]
    confirmation = world.host.loopback.requests[-1]
    assert confirmation.method == "GET" and "Action=ConfirmSubscription" in confirmation.path


def test_a_subscription_of_a_topic_not_allowed_is_refused_and_not_confirmed(
    world: World,
) -> None:
    message = documented(subscription(topic=OTHER_TOPIC), SIGNING.key)
    with pytest.raises(BadSignature, match="topics"):
        world.source().authenticate(normalize_headers(headers(message)), body(message), now=NOW)
    assert world.host.attempts == []


def test_with_confirm_off_the_subscription_is_left_to_the_operator(world: World) -> None:
    message = documented(subscription(), SIGNING.key)
    with pytest.raises(Handshake) as answered:
        world.source(confirm=False).authenticate(
            normalize_headers(headers(message)), body(message), now=NOW
        )
    assert answered.value.answer == {"status": "subscription_not_confirmed", "topic": TOPIC}
    assert world.host.attempts == [CERT_URL]


def test_a_subscribe_url_off_the_sns_hosts_is_not_fetched(world: World) -> None:
    source = world.source()
    for url in (
        "https://evil.example/?Action=ConfirmSubscription&TopicArn=" + quote(TOPIC, safe=""),
        f"https://{HOST}/?Action=Unsubscribe&TopicArn=" + quote(TOPIC, safe=""),
        f"https://{HOST}/?Action=ConfirmSubscription&TopicArn=" + quote(OTHER_TOPIC, safe=""),
    ):
        message = documented({**subscription(), "SubscribeURL": url}, SIGNING.key)
        with pytest.raises(PayloadError, match="SubscribeURL"):
            source.authenticate(normalize_headers(headers(message)), body(message), now=NOW)
    assert world.host.attempts == [CERT_URL]


def test_an_unsubscribe_confirmation_is_answered_and_nothing_stored(world: World) -> None:
    message = documented(subscription("UnsubscribeConfirmation"), SIGNING.key)
    with pytest.raises(Handshake) as answered:
        world.source().authenticate(normalize_headers(headers(message)), body(message), now=NOW)
    assert answered.value.answer == {"status": "unsubscribed", "topic": TOPIC}


def test_a_failed_confirmation_is_503_so_sns_retries(world: World) -> None:
    message = documented(subscription(), SIGNING.key)
    source = world.source()
    source.verify(normalize_headers(headers(message)), body(message), now=NOW)  # cached
    world.sns.status = 500
    with pytest.raises(VerificationUnavailable, match="500"):
        source.authenticate(normalize_headers(headers(message)), body(message), now=NOW)


# -- the test kit, judged by sns-validator (npm) ----------------------------------------------


def test_sns_validator_accepts_what_the_kit_signs_and_what_the_source_accepts() -> None:
    source = AmazonSNS(topics=[TOPIC], certificate=KIT.pem)
    deliveries = [
        sign(source, {"order": "ord_1"}, at=NOW, signature_version=version, **extra)
        for version in ("1", "2")
        for extra in ({}, {"subject": "paid"}, {"type": "SubscriptionConfirmation"})
    ]
    tampered = [(h, b.replace(b"ord_1", b"ord_2")) for h, b in deliveries[:2]]
    requests = [
        {"provider": "sns", "body": b, "certificates": {
            json.loads(b)["SigningCertURL"]: KIT.pem}}
        for _, b in deliveries + tampered
    ]  # fmt: skip
    verdicts = [answer["valid"] for answer in npm_judges(oracle_dir(), requests)]
    assert verdicts == [True] * len(deliveries) + [False] * len(tampered)
    for h, b in deliveries:
        source.verify(normalize_headers(h), b, now=NOW)


def test_the_inbox_stores_a_notification_once_under_its_message_id(tmp_path: Path) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/sns.db")
    # confirm=False: this test reaches no SNS host to confirm at.
    source = inbox.add_source(AmazonSNS(topics=[TOPIC], certificate=KIT.pem, confirm=False))
    first = inbox.receive("sns", *sign(source, {"order": "ord_1"}, at=time.time()))
    retry = inbox.receive("sns", *sign(source, {"order": "ord_1"}, at=time.time()))
    hello = inbox.receive(
        "sns", *sign(source, "hello", at=time.time(), type="SubscriptionConfirmation")
    )
    inbox.close()
    assert first.body["status"] == "accepted"
    assert retry.body["status"] == "duplicate" and not retry.key_conflict
    assert hello.status_code == 200 and "event_id" not in hello.body
