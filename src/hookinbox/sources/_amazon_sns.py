"""Amazon SNS (HTTPS subscriptions): an RSA signature over the message's canonical fields.

The body is SNS's JSON envelope. `Signature` (base64) signs the canonical string AWS
documents: for a `Notification`, the fields `Message`, `MessageId`, `Subject` (only when
present), `Timestamp`, `TopicArn` and `Type`; for a `SubscriptionConfirmation` or an
`UnsubscribeConfirmation`, `Message`, `MessageId`, `SubscribeURL`, `Timestamp`, `Token`,
`TopicArn` and `Type`; each as its name, a newline, its value, a newline. `SignatureVersion`
`1` is SHA1withRSA, `2` SHA256withRSA. The key is the certificate at `SigningCertURL`, which
must be an SNS host's (`https://sns.<region>.amazonaws.com[.cn]/SimpleNotificationService-
....pem`), fetched and cached by `sources/_keys.py` (or one you pin with `certificate=`).

A valid signature says AWS sent the message, not that it is yours: anyone's topic can
subscribe your URL. So `topics=` (the topic ARNs you allow) is required, and a message of
another topic is refused (401) before anything is fetched.

A `SubscriptionConfirmation` of an allowed topic is confirmed by fetching its `SubscribeURL`
(an SNS host, `Action=ConfirmSubscription`, the same topic) once the signature verified, and
answered 200 with nothing stored; `confirm=False` leaves that to the operator (the answer and
a warning say which topic waits). An `UnsubscribeConfirmation` is answered 200, stored nothing,
logged. A notification is stored under its `MessageId`, which SNS keeps on every retry.

Needs cryptography and httpx (the `keys` extra): `hookinbox.sources.AmazonSNS` loads this
module on first use.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

from hookinbox._errors import (
    BadSignature,
    ConfigurationError,
    PayloadError,
    VerificationUnavailable,
)
from hookinbox._logging import logger
from hookinbox.sources._base import Source
from hookinbox.sources._identity import (
    Identity,
    compact_json,
    event_key,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._keys import AllowList, Fetch, Fetcher, KeyCache, Parsed
from hookinbox.sources._paypal_certs import certificate_names, load_pem_certificates, utc
from hookinbox.sources._provider import provider
from hookinbox.sources._signatures import (
    MAX_SIGNATURE_HEADER,
    Headers,
    check_tolerance,
    decode_digest,
)

if TYPE_CHECKING:
    import httpx

log = logger("hookinbox.sources._amazon_sns")

NOTIFICATION = "Notification"
SUBSCRIBE = "SubscriptionConfirmation"
UNSUBSCRIBE = "UnsubscribeConfirmation"
SIGNED_FIELDS = {
    NOTIFICATION: ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"),
    SUBSCRIBE: ("Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"),
}
SIGNED_FIELDS[UNSUBSCRIBE] = SIGNED_FIELDS[SUBSCRIBE]
OPTIONAL_FIELDS = frozenset({"Subject"})
REPEATED_FIELDS = ("Type", "MessageId", "TopicArn", "Subject", "Message")
HASHES: dict[str, type[hashes.HashAlgorithm]] = {"1": hashes.SHA1, "2": hashes.SHA256}
SNS_HOST = re.compile(r"sns\.[a-z0-9-]{1,32}\.amazonaws\.com(\.cn)?")
CERTIFICATES = AllowList(
    "SigningCertURL",
    host_pattern=SNS_HOST,
    path=re.compile(r"/SimpleNotificationService-[A-Za-z0-9_-]{1,128}\.pem"),
)
SUBSCRIBE_URLS = AllowList("SubscribeURL", host_pattern=SNS_HOST, path=re.compile("/?"), query=True)
CERTIFICATE_NAME = re.compile(r"sns(\.[a-z0-9-]{1,32})?\.amazonaws\.com(\.cn)?")
TOPIC_ARN = re.compile(r"arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_.-]{1,256}")
MAX_FIELD = 300 * 1024  # a message is at most 256 KiB; the envelope's fields are small
CERTIFICATE_AGE = 24 * 3600.0  # the URL names one file; kept a day, and never past its end


class AmazonSNS(Source):
    default_name = "sns"
    verifies_over_network = True  # the certificate, and a subscription's confirmation
    # SNS retries an HTTP/S delivery as its delivery policy says (by default 3 times within
    # about 20 s; at most an hour of retries): a day's margin.
    redelivery_window = timedelta(days=1)
    stored_headers = (
        "x-amz-sns-message-type",
        "x-amz-sns-message-id",
        "x-amz-sns-topic-arn",
        "x-amz-sns-subscription-arn",
    )
    signature_headers = ("x-amz-sns-message-type",)  # the signature is in the body

    def __init__(
        self,
        *,
        topics: str | Sequence[str],
        name: str | None = None,
        confirm: bool = True,
        certificate: str | bytes | None = None,
        tolerance: float | None = None,
        timeout: float = 5.0,
        cache_size: int = 16,
        ssl_context: ssl.SSLContext | None = None,
        transport: httpx.BaseTransport | None = None,
        redelivery_window: timedelta | None = None,
    ) -> None:
        super().__init__(name=name)
        self.topics = _topics(topics)
        self.confirm = confirm
        self.tolerance = tolerance
        if redelivery_window is not None:
            self.redelivery_window = redelivery_window
        self._pinned = _pinned(certificate) if certificate is not None else None
        self._fetcher = Fetcher(
            feature="hookinbox.sources.AmazonSNS",
            timeout=timeout,
            ssl_context=ssl_context,
            transport=transport,
        )
        self._certificates: KeyCache[_Certificate] = KeyCache(
            CERTIFICATES,
            _read_certificate,
            self._fetcher,
            # A path SNS has no file at is the sender's doing: the certificate does not exist.
            unknown=lambda status, _body: status in (403, 404, 410),
            default_max_age=CERTIFICATE_AGE,
            cache_size=cache_size,
        )

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        message = _message(body)
        kind = _text(message, "Type")
        if kind not in SIGNED_FIELDS:
            raise BadSignature(f"Type {kind!r} is no SNS message type")
        announced = headers.get("x-amz-sns-message-type")
        if announced is not None and announced.strip() != kind:
            raise BadSignature("x-amz-sns-message-type and the body's Type disagree")
        topic = _text(message, "TopicArn")
        if topic not in self.topics:
            raise BadSignature(f"topic {topic[:256]!r} is not one of this source's topics")
        algorithm = HASHES.get(_text(message, "SignatureVersion"))
        if algorithm is None:
            raise BadSignature("SignatureVersion must be 1 or 2")
        signature = decode_digest(_text(message, "Signature"), what="Signature", encoding="base64")
        signed = canonical(message, kind)
        key = self._key(_text(message, "SigningCertURL"), now)
        try:
            key.verify(signature, signed, padding.PKCS1v15(), algorithm())
        except (InvalidSignature, ValueError) as exc:
            raise BadSignature() from exc
        if self.tolerance is not None:
            when = parse_time(message.get("Timestamp"))
            if when is None:
                raise BadSignature("Timestamp is not an ISO 8601 time")
            check_tolerance(when.timestamp(), now=now, tolerance=self.tolerance)

    def _key(self, url: str, now: float) -> RSAPublicKey:
        if self._pinned is not None:
            _check_validity(self._pinned, now)
            return _rsa(self._pinned)
        certificate = self._certificates.get(url, now=now)
        _check_validity(certificate.certificate, now)
        return certificate.key

    def handshake(self, headers: Headers, body: bytes) -> dict[str, Any] | None:
        message = parse_json_object(body)
        kind, topic = message.get("Type"), message.get("TopicArn")
        if kind == UNSUBSCRIBE:
            log.warning("SNS unsubscribed source %r from topic %s", self.name, topic)
            return {"status": "unsubscribed", "topic": topic}
        if kind != SUBSCRIBE:
            return None
        if not self.confirm:
            log.warning(
                "SNS asks source %r to confirm its subscription to topic %s: confirm it in the "
                "AWS console or with the SubscribeURL of the stored log line's delivery",
                self.name,
                topic,
            )
            return {"status": "subscription_not_confirmed", "topic": topic}
        self._confirm(str(message.get("SubscribeURL")), str(topic))
        log.info("source %r confirmed its SNS subscription to topic %s", self.name, topic)
        return {"status": "subscription_confirmed", "topic": topic}

    def _confirm(self, url: str, topic: str) -> None:
        """GET the signed `SubscribeURL`, if it is SNS's and confirms this very topic."""
        try:
            parts = SUBSCRIBE_URLS.check(url)
        except BadSignature as exc:
            raise PayloadError("SubscribeURL is not an SNS confirmation URL") from exc
        query = parse_qs(parts.query, keep_blank_values=True)
        if query.get("Action") != ["ConfirmSubscription"] or query.get("TopicArn") != [topic]:
            raise PayloadError("SubscribeURL does not confirm this message's topic")
        status, _age, _body = self._fetcher.send(SUBSCRIBE_URLS, Fetch(url))
        if status != 200:
            raise VerificationUnavailable(
                f"SNS answered {status} to the subscription's confirmation"
            )

    def identify(self, headers: Headers, body: bytes) -> Identity:
        message = parse_json_object(body)
        return Identity(
            event_id=event_key(message.get("MessageId"), "MessageId"),
            event_type=optional_text(message.get("Subject")) or NOTIFICATION,
            occurred_at=parse_time(message.get("Timestamp")),
            payload=message,
            # A retry repeats the message; what else differs (a signature made anew) is not it.
            fingerprint=compact_json({k: message.get(k) for k in REPEATED_FIELDS}),
        )


class _Certificate:
    __slots__ = ("certificate", "key")

    def __init__(self, certificate: x509.Certificate, key: RSAPublicKey) -> None:
        self.certificate = certificate
        self.key = key


def _read_certificate(pem: bytes) -> Parsed[_Certificate]:
    """SNS's signing certificate: an RSA certificate issued to an SNS name, kept until it ends
    at the latest. It is trusted because it came over TLS from an SNS host (the file holds the
    leaf only, so there is no chain to build)."""
    certificate = load_pem_certificates(pem, "the document at SigningCertURL")[0]
    key = _rsa(certificate)
    if not any(CERTIFICATE_NAME.fullmatch(n.lower()) for n in certificate_names(certificate)):
        raise BadSignature("the certificate at SigningCertURL is not issued to SNS")
    return Parsed(_Certificate(certificate, key), certificate.not_valid_after_utc.timestamp())


def _rsa(certificate: x509.Certificate) -> RSAPublicKey:
    try:
        key = certificate.public_key()
    except (ValueError, TypeError) as exc:
        raise BadSignature("the SNS certificate's key cannot be read") from exc
    if not isinstance(key, RSAPublicKey):
        raise BadSignature("the SNS certificate's key is not RSA")
    return key


def _check_validity(certificate: x509.Certificate, now: float) -> None:
    when = utc(now)
    if not certificate.not_valid_before_utc <= when <= certificate.not_valid_after_utc:
        raise BadSignature("the SNS certificate is not valid now")


def _pinned(pem: str | bytes) -> x509.Certificate:
    try:
        certificate = load_pem_certificates(pem.encode() if isinstance(pem, str) else pem, "")[0]
        _rsa(certificate)
    except BadSignature as exc:
        raise ConfigurationError("the SNS certificate must be a PEM RSA certificate") from exc
    return certificate


def _topics(topics: str | Sequence[str]) -> frozenset[str]:
    listed = (topics,) if isinstance(topics, str) else tuple(topics)
    if not listed or not all(isinstance(t, str) and TOPIC_ARN.fullmatch(t) for t in listed):
        raise ConfigurationError(
            "AmazonSNS needs topics=: the ARNs of the topics it accepts "
            "(arn:aws:sns:<region>:<account>:<name>)"
        )
    return frozenset(listed)


def _message(body: bytes) -> dict[str, Any]:
    try:
        return parse_json_object(body)
    except PayloadError as exc:
        raise BadSignature("the body is not an SNS message (a JSON object)") from exc


def _text(message: dict[str, Any], name: str) -> str:
    value = message.get(name)
    if not isinstance(value, str) or not value:
        raise BadSignature(f"the SNS message has no {name}")
    if len(value) > (MAX_FIELD if name == "Message" else MAX_SIGNATURE_HEADER):
        raise BadSignature(f"the SNS message's {name} is too long")
    return value


def canonical(message: dict[str, Any], kind: str) -> bytes:
    """The text SNS signs: each signed field present, as `name\\nvalue\\n`, in AWS's order."""
    parts = []
    for name in SIGNED_FIELDS[kind]:
        if name in OPTIONAL_FIELDS and message.get(name) is None:
            continue
        parts.append(f"{name}\n{_text(message, name)}\n")
    try:
        return "".join(parts).encode()
    except UnicodeEncodeError as exc:  # a lone surrogate from a \\ud800 escape
        raise BadSignature("the SNS message is not UTF-8 text") from exc


EXAMPLE_TOPIC = "arn:aws:sns:us-east-1:123456789012:hookinbox-example"

PROVIDER = provider(
    AmazonSNS,
    sign=None,  # hookinbox.testing's, with its test certificate's private key
    example=lambda keys: AmazonSNS(topics=[EXAMPLE_TOPIC], certificate=keys.paypal_pem),
    event=lambda tag: {"order": f"ord_{tag}", "status": "paid"},
    signature_header=None,
    signed_in_body=True,
    forgery=lambda: {"private_key": rsa.generate_private_key(public_exponent=65537, key_size=2048)},
)
