"""Braintree: judged by Braintree's own SDK (`braintree` on PyPI). Its
`WebhookTesting.sample_notification` makes the deliveries (signed as Braintree signs them), its
`WebhookNotification.parse` judges what the test kit signs, and its `WebhookNotification.verify`
the answer to a `bt_challenge`. The source's own rules (pairs, rotation, the XML it refuses)
are held here too."""

from __future__ import annotations

import base64
import hashlib
import hmac
import warnings
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import parse_qs, urlencode

import pytest

from hookinbox import Inbox
from hookinbox._errors import BadSignature, ConfigurationError, Handshake, PayloadError
from hookinbox.http import answer_get
from hookinbox.sources import Braintree
from hookinbox.sources._braintree import sample_payload
from hookinbox.testing import sign as kit_sign

with warnings.catch_warnings():  # braintree warns of its own deprecated names when imported
    warnings.simplefilter("ignore", DeprecationWarning)
    import braintree
    from braintree.exceptions.invalid_signature_error import InvalidSignatureError
    from braintree.webhook_notification import WebhookNotification

PUBLIC, PRIVATE = "integration_public_key", "integration_private_key"
FORM = {"content-type": "application/x-www-form-urlencoded"}


def gateway(public: str = PUBLIC, private: str = PRIVATE) -> braintree.BraintreeGateway:
    config = braintree.Configuration(
        braintree.Environment.Sandbox,
        merchant_id="integration_merchant_id",
        public_key=public,
        private_key=private,
    )
    return braintree.BraintreeGateway(config)


def sample(
    kind: str = WebhookNotification.Kind.SubscriptionWentPastDue,
    ident: str = "sub-1",
    gw: braintree.BraintreeGateway | None = None,
) -> bytes:
    fields = (gw or gateway()).webhook_testing.sample_notification(kind, ident)
    return urlencode({"bt_signature": fields["bt_signature"],
                      "bt_payload": fields["bt_payload"].decode()}).encode()  # fmt: skip


def fields(body: bytes) -> tuple[str, str]:
    form = parse_qs(body.decode())
    return form["bt_signature"][0], form["bt_payload"][0]


@pytest.mark.parametrize(
    ("kind", "subject"),
    [
        (WebhookNotification.Kind.SubscriptionWentPastDue, "sub-1"),
        (WebhookNotification.Kind.TransactionSettled, "txn-1"),
        (WebhookNotification.Kind.DisputeOpened, "dsp-1"),
        (WebhookNotification.Kind.Disbursement, "dsb-1"),
    ],
)
def test_the_sdks_sample_notifications_verify_and_key_as_the_sdk_reads_them(
    kind: str, subject: str
) -> None:
    body = sample(kind, subject)
    identity = Braintree(public_key=PUBLIC, private_key=PRIVATE).authenticate(FORM, body, now=0)
    parsed = gateway().webhook_notification.parse(*fields(body))
    stamp = parsed.timestamp.replace(tzinfo=UTC)
    assert identity.event_id == f"{kind}:{subject}:{stamp:%Y-%m-%dT%H:%M:%SZ}"
    assert identity.event_type == parsed.kind == kind
    assert identity.occurred_at == stamp
    assert identity.payload == {"bt_signature": fields(body)[0], "bt_payload": fields(body)[1]}


def test_a_notification_without_a_subject_id_is_keyed_by_kind_and_time() -> None:
    identity = Braintree(public_key=PUBLIC, private_key=PRIVATE).authenticate(
        FORM, sample(WebhookNotification.Kind.Check, ""), now=0
    )
    assert identity.event_id.startswith("check:-:")


def test_what_the_sdk_refuses_for_another_key_pair_is_refused() -> None:
    body = sample(gw=gateway(PUBLIC, "another_private_key"))
    with pytest.raises(InvalidSignatureError):
        gateway().webhook_notification.parse(*fields(body))
    with pytest.raises(BadSignature):
        Braintree(public_key=PUBLIC, private_key=PRIVATE).verify(FORM, body, now=0)
    stranger = sample(gw=gateway("stranger_public_key", PRIVATE))  # the pair names another key
    with pytest.raises(BadSignature):
        Braintree(public_key=PUBLIC, private_key=PRIVATE).verify(FORM, stranger, now=0)


def test_a_changed_payload_or_a_missing_field_is_refused() -> None:
    signature, payload = fields(sample())
    changed = base64.encodebytes(base64.decodebytes(payload.encode()).replace(b"sub-1", b"sub-2"))
    for body in (
        urlencode({"bt_signature": signature, "bt_payload": changed.decode()}).encode(),
        urlencode({"bt_payload": payload}).encode(),
        urlencode({"bt_signature": signature}).encode(),
        urlencode([("bt_signature", signature), ("bt_signature", signature),
                   ("bt_payload", payload)]).encode(),
        b"\xff\xfe",
    ):  # fmt: skip
        with pytest.raises(BadSignature):
            Braintree(public_key=PUBLIC, private_key=PRIVATE).verify(FORM, body, now=0)


def test_rotation_any_configured_pair_among_several_verifies() -> None:
    old, new = gateway("old_public", "old_private"), gateway("new_public", "new_private")
    old_sig, payload = fields(sample(gw=old))
    new_sig = (
        "new_public|"
        + hmac.new(
            hashlib.sha1(b"new_private").digest(), payload.encode(), hashlib.sha1
        ).hexdigest()
    )
    body = urlencode({"bt_signature": f"{old_sig}&{new_sig}", "bt_payload": payload}).encode()
    for source in (
        Braintree(public_key="new_public", private_key="new_private"),
        Braintree(public_key=["old_public", "x"], private_key=["old_private", "y"]),
    ):
        source.verify(FORM, body, now=0)
    assert new.webhook_notification.parse(f"{old_sig}&{new_sig}", payload).kind
    with pytest.raises(ConfigurationError):
        Braintree(public_key=["a", "b"], private_key="c")


def test_a_signed_payload_with_a_document_type_is_refused_before_any_entity() -> None:
    laughs = (
        b'<?xml version="1.0"?><!DOCTYPE n [<!ENTITY a "aaaaaaaaaa">'
        b'<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>'
        b"<notification><kind>&b;</kind><timestamp>2026-11-30T12:00:00Z</timestamp></notification>"
    )
    external = (
        b'<!DOCTYPE n [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        b"<notification><kind>&x;</kind></notification>"
    )
    for xml in (laughs, external, laughs.decode().encode("utf-16")):
        payload = base64.encodebytes(xml).decode()
        signature = hmac.new(
            hashlib.sha1(PRIVATE.encode()).digest(), payload.encode(), hashlib.sha1
        ).hexdigest()
        body = urlencode({"bt_signature": f"{PUBLIC}|{signature}", "bt_payload": payload}).encode()
        source = Braintree(public_key=PUBLIC, private_key=PRIVATE)
        source.verify(FORM, body, now=0)  # signed with the key: only the XML is wrong
        with pytest.raises(PayloadError):
            source.identify(FORM, body)


def test_the_challenge_is_answered_as_the_sdk_answers_it() -> None:
    source = Braintree(public_key=PUBLIC, private_key=PRIVATE)
    challenge = "38aa10d4fb8c43f3f1d2"
    answer = source.answer_get({"bt_challenge": [challenge]}, {})
    assert isinstance(answer, Handshake)
    assert answer.answer == gateway().webhook_notification.verify(challenge)
    for bad in (None, "38AA10D4FB8C43F3F1D2", "abc", "a" * 33, '{"bt_payload": 1}'):
        with pytest.raises(PayloadError):
            source.answer_get({} if bad is None else {"bt_challenge": [bad]}, {})


def test_end_to_end_challenge_notification_retry_and_forgery(tmp_path: Path) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/braintree.db")
    inbox.add_source(Braintree(public_key=PUBLIC, private_key=PRIVATE))
    reply = answer_get(inbox, "braintree", {}, query="bt_challenge=38aa10d4fb8c43f3f1d2")
    assert reply.content == gateway().webhook_notification.verify("38aa10d4fb8c43f3f1d2").encode()
    body = sample()
    first = inbox.receive("braintree", FORM, body)
    again = inbox.receive("braintree", FORM, body)
    forged = inbox.receive("braintree", FORM, sample(gw=gateway(PUBLIC, "guessed")))
    stored = inbox.store.get_event("braintree", first.body["event_id"])
    inbox.close()
    assert (first.body["status"], again.body["status"]) == ("accepted", "duplicate")
    assert (forged.status_code, forged.body["error"]) == (401, "invalid_signature")
    assert stored is not None and stored.body == body  # the form, for Braintree's own parser
    assert stored.occurred_at is not None and stored.occurred_at < datetime.now(UTC)


def test_the_kits_signer_is_accepted_by_the_sdk() -> None:
    source = Braintree(public_key=PUBLIC, private_key=PRIVATE)
    payload = sample_payload(
        "subscription_canceled", "subscription", "sub-9", "2026-11-30T12:00:00Z"
    )
    _, body = kit_sign(source, {"bt_payload": payload})
    parsed = gateway().webhook_notification.parse(*fields(body))
    assert (parsed.kind, parsed.subscription.id) == ("subscription_canceled", "sub-9")
    _, forged = kit_sign(source, {"bt_payload": payload}, secret="another")
    with pytest.raises(InvalidSignatureError):
        gateway().webhook_notification.parse(*fields(forged))
