"""Amazon SNS messages signed with a test certificate (the `keys` extra).

SNS signs with the private key of a certificate only AWS holds. `sns_test_certificate()` makes
a key pair and a certificate issued to `sns.amazonaws.com`; pin it in the source
(`AmazonSNS(topics=[...], certificate=cert.pem)`) and `sign` finds the private key by the
pinned certificate (the PayPal test certificate signs too: one registry of RSA test keys).

`sign(source, message)` wraps `message` (the text, or a JSON value, your topic publishes) in
the envelope SNS posts, signed per AWS's documented canonical string: fields `type`
("Notification", "SubscriptionConfirmation", "UnsubscribeConfirmation"), `topic_arn`,
`subject`, `message_id`, `signature_version` ("1" or "2"), `cert_url`, `subscribe_url`.
"""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any
from urllib.parse import quote

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from hookinbox.sources._amazon_sns import AmazonSNS
from hookinbox.sources._provider import body_id
from hookinbox.testing._paypal import _KEYS, self_signed
from hookinbox.testing._signing import register_signer

TEST_CERT_URL = "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-hookinboxtest.pem"
HASHES = {"1": hashes.SHA1, "2": hashes.SHA256}


@dataclass(frozen=True)
class SNSTestCertificate:
    """A signing certificate and its private key, made for tests; not AWS's."""

    pem: str
    """The certificate, for `AmazonSNS(topics=..., certificate=pem)`, or to serve at a
    `SigningCertURL` in a test."""
    private_key: rsa.RSAPrivateKey


@cache
def sns_test_certificate() -> SNSTestCertificate:
    """One key pair and certificate per process."""
    return SNSTestCertificate(*self_signed("sns.amazonaws.com"))


def _private_key(source: AmazonSNS, fields: dict[str, Any]) -> rsa.RSAPrivateKey:
    given = fields.pop("private_key", None)
    if given is not None:
        return given  # type: ignore[no-any-return]
    public = source._pinned.public_key() if source._pinned is not None else None
    if isinstance(public, rsa.RSAPublicKey) and public.public_numbers().n in _KEYS:
        return _KEYS[public.public_numbers().n]
    raise TypeError(
        "sign() needs the private key of the SNS source's certificate: build the source with "
        "certificate=sns_test_certificate().pem, or pass private_key="
    )


def _timestamp(t: int) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


@register_signer(AmazonSNS)
def _sns(
    source: AmazonSNS, body: bytes, t: int, fields: dict[str, Any]
) -> tuple[dict[str, str], bytes]:
    key = _private_key(source, fields)
    kind = fields.pop("type", "Notification")
    topic = fields.pop("topic_arn", None) or sorted(source.topics)[0]
    version = fields.pop("signature_version", "2")
    region = topic.split(":")[3]
    message_id = fields.pop("message_id", None) or body_id(source, body)
    envelope: dict[str, str] = {"Type": kind, "MessageId": message_id}
    order: tuple[str, ...]
    if kind == "Notification":
        subject = fields.pop("subject", None)
        envelope.update(TopicArn=topic, Message=body.decode())
        if subject is not None:
            envelope["Subject"] = subject
        envelope["Timestamp"] = _timestamp(t)
        order = ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type")
    else:
        token = uuid.uuid4().hex * 4
        envelope.update(
            Token=token,
            TopicArn=topic,
            Message=body.decode(),
            SubscribeURL=fields.pop("subscribe_url", None)
            or f"https://sns.{region}.amazonaws.com/?Action=ConfirmSubscription"
            f"&TopicArn={quote(topic, safe='')}&Token={token}",
            Timestamp=_timestamp(t),
        )
        order = ("Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type")
    # AWS's recipe: each field present as "name\nvalue\n", in this order.
    text = "".join(f"{name}\n{envelope[name]}\n" for name in order if name in envelope)
    signature = key.sign(text.encode(), padding.PKCS1v15(), HASHES[version]())
    envelope.update(
        SignatureVersion=version,
        Signature=base64.b64encode(signature).decode(),
        SigningCertURL=fields.pop("cert_url", TEST_CERT_URL),
    )
    headers = {
        "Content-Type": "text/plain; charset=UTF-8",
        "User-Agent": "Amazon Simple Notification Service Agent",
        "x-amz-sns-message-type": kind,
        "x-amz-sns-message-id": message_id,
        "x-amz-sns-topic-arn": topic,
    }
    if kind == "Notification":
        headers["x-amz-sns-subscription-arn"] = f"{topic}:{uuid.uuid5(uuid.NAMESPACE_URL, topic)}"
    return headers, json.dumps(envelope, indent=2).encode()
