"""Braintree: a form with `bt_signature` and `bt_payload`, and a GET `bt_challenge`.

A notification is a form POST: `bt_payload` is base64 of an XML `<notification>` (its `kind`,
`timestamp` and `subject`), and `bt_signature` lists `public_key|hex` pairs joined by `&`,
one per API key pair Braintree signs with. Each signature is the hex HMAC-SHA1 of the
`bt_payload` text as sent (the base64, its line breaks included), keyed with the SHA-1 digest
of the private key. Only the pairs naming a configured public key are compared, each with its
own private key (Braintree's SDKs do the same, and also accept the payload with one more line
break at the end). Braintree signs no time.

The handshake: when a webhook is created or checked, Braintree sends `GET
?bt_challenge=<hex>` and wants `<public_key>|<hex HMAC-SHA1 of the challenge>` back as text.
The challenge must be 20 to 32 lowercase hex digits, as the SDKs require: a base64 payload of
such digits decodes to bytes no XML can start with (the first is at least 0x68), so the
answer can never be the signature of a notification this source accepts.

The XML is read only once the signature verified, with the standard library's expat, which
refuses a document type declaration or an entity declaration outright (`_notification`): no
entity is expanded and nothing is fetched. The key of a notification is `<kind>:<subject's
id>:<timestamp>` (Braintree sends no notification id; the subject is the transaction,
subscription, dispute, ... it is about), the type its `kind`, the time its `timestamp`. The
stored body is the form as received, so a handler may hand its two fields to Braintree's own
`WebhookNotification.parse`; a retry is told from a key conflict by `bt_payload` alone (the
signature pairs change with the keys).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, NoReturn
from urllib.parse import parse_qs, urlencode
from xml.parsers import expat

from hookinbox._errors import BadSignature, ConfigurationError, Handshake, PayloadError
from hookinbox._payload import FORM, form_fields
from hookinbox.sources._base import Source
from hookinbox.sources._handshakes import Query, query_value
from hookinbox.sources._identity import Identity, event_key, optional_text, parse_time
from hookinbox.sources._provider import provider
from hookinbox.sources._secrets import secrets_tuple, utf8_key
from hookinbox.sources._signatures import (
    MAX_SIGNATURE_HEADER,
    MAX_SIGNATURES,
    Headers,
    hmac_digest,
    matches_any,
)

MAX_PAYLOAD = 1 << 20
"""The longest `bt_payload` read, in characters (real ones are a few KiB)."""
MAX_DEPTH = 32
"""The deepest XML element read (a notification nests about five levels)."""
_BASE64_TEXT = re.compile(rb"[A-Za-z0-9+/=\n]+")
_CHALLENGE = re.compile(r"[a-f0-9]{20,32}")


class Braintree(Source):
    default_name = "braintree"
    # Braintree retries a failed notification hourly for up to 24 hours (not confirmed).
    redelivery_window = timedelta(days=2)
    answers_get = True

    def __init__(
        self,
        *,
        public_key: str | Sequence[str],
        private_key: str | Sequence[str],
        name: str | None = None,
    ) -> None:
        """One API key pair, or several while one is replaced: `public_key[i]` goes with
        `private_key[i]`."""
        super().__init__(name=name)
        publics, privates = secrets_tuple(public_key), secrets_tuple(private_key)
        if len(publics) != len(privates):
            raise ConfigurationError("Braintree needs one private_key for each public_key")
        if any("|" in key or "&" in key for key in publics):
            raise ConfigurationError("a Braintree public key holds no '|' or '&'")
        # The HMAC key is the SHA-1 digest of the private key, as Braintree keys it.
        self._pairs = [
            (public, hashlib.sha1(utf8_key(private)).digest())
            for public, private in zip(publics, privates, strict=True)
        ]

    def answer_get(self, query: Query, headers: Headers) -> Handshake:
        challenge = query_value(query, "bt_challenge")
        if challenge is None or not _CHALLENGE.fullmatch(challenge):
            raise PayloadError("bt_challenge must be 20 to 32 lowercase hex digits")
        public, key = self._pairs[0]  # the pair Braintree signs with now
        return Handshake(f"{public}|{hmac_digest(key, challenge.encode(), 'sha1').hex()}")

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        signature, payload = _fields(body)
        if len(signature) > MAX_SIGNATURE_HEADER:
            raise BadSignature(f"bt_signature is longer than {MAX_SIGNATURE_HEADER} characters")
        pairs = [pair.split("|", 1) for pair in signature.split("&") if "|" in pair]
        if len(pairs) > MAX_SIGNATURES:
            raise BadSignature(f"bt_signature lists more than {MAX_SIGNATURES} signatures")
        raw = payload.encode()
        found = False
        for public, key in self._pairs:
            candidates = [sig.strip().encode() for name, sig in pairs if name == public]
            for signed in (raw, raw + b"\n"):
                found |= matches_any(hmac_digest(key, signed, "sha1").hex().encode(), candidates)
        if not found:
            raise BadSignature("no bt_signature pair matches bt_payload and a configured key")

    def identify(self, headers: Headers, body: bytes) -> Identity:
        _, payload = _fields(body)
        if len(payload) > MAX_PAYLOAD or not _BASE64_TEXT.fullmatch(payload.encode()):
            raise PayloadError("bt_payload is not base64 text")
        try:
            xml = base64.b64decode(payload.replace("\n", ""), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise PayloadError("bt_payload is not base64") from exc
        found = _notification(xml)
        kind = event_key(found.get("kind"), "notification kind")
        timestamp = event_key(found.get("timestamp"), "notification timestamp")
        subject = found.get("subject-id") or "-"
        return Identity(
            event_id=event_key(f"{kind}:{subject}:{timestamp}"),
            event_type=optional_text(kind),
            occurred_at=parse_time(timestamp),
            payload=form_fields(body),
            fingerprint=payload.replace("\n", "").encode(),
        )


def _fields(body: bytes) -> tuple[str, str]:
    """`bt_signature` and `bt_payload`, each given once; a form without them is unsigned."""
    try:
        fields = parse_qs(body.decode(), keep_blank_values=True, max_num_fields=16)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadSignature("the body is not Braintree's form") from exc
    values = [fields.get("bt_signature", []), fields.get("bt_payload", [])]
    if any(len(given) != 1 or not given[0] for given in values):
        raise BadSignature("the form needs one bt_signature and one bt_payload")
    return values[0][0], values[1][0]


def _notification(xml: bytes) -> dict[str, str]:
    """The kind, the timestamp and the subject's id of a `<notification>` document.

    Read with expat directly: a document type declaration (and with it any entity) is
    refused as soon as it starts, whatever the document's encoding, and nothing outside the
    document is ever read."""
    parser = expat.ParserCreate()
    path: list[str] = []
    texts: list[list[str]] = []
    found: dict[str, str] = {}

    def refuse(*_: Any) -> NoReturn:
        raise PayloadError("the notification declares a document type or an entity")

    def start(name: str, attributes: dict[str, str]) -> None:
        if len(path) >= MAX_DEPTH:
            raise PayloadError("the notification nests too deep")
        path.append(name)
        texts.append([])

    def end(name: str) -> None:
        text = "".join(texts.pop()).strip()
        where = tuple(path)
        path.pop()
        if where in (("notification", "kind"), ("notification", "timestamp")):
            found.setdefault(where[1], text)
        elif len(where) == 4 and where[:2] == ("notification", "subject") and where[3] == "id":
            found.setdefault("subject-id", text)

    def characters(data: str) -> None:
        if texts:
            texts[-1].append(data)

    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    parser.ExternalEntityRefHandler = refuse
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = characters
    try:
        parser.Parse(xml, True)
    except expat.ExpatError as exc:
        raise PayloadError("bt_payload is not an XML notification") from exc
    return found


def sign(
    source: Braintree, body: bytes, t: int, fields: dict[str, Any]
) -> tuple[dict[str, str], bytes]:
    # Braintree's recipe: "<public key>|<hex HMAC-SHA1 of bt_payload>", the HMAC keyed with the
    # SHA-1 digest of the private key; the pair joins the form beside bt_payload.
    private = fields.pop("secret", None)
    public, key = source._pairs[0]
    if private is not None:
        key = hashlib.sha1(private.encode()).digest()
    form = dict(parse_qs(body.decode(), keep_blank_values=True))
    payload = form["bt_payload"][0]
    signature = hmac.new(key, payload.encode(), hashlib.sha1).hexdigest()
    signed = urlencode({"bt_signature": f"{public}|{signature}", "bt_payload": payload})
    return {"Content-Type": fields.pop("content_type", FORM)}, signed.encode()


def sample_payload(kind: str, subject: str, ident: str, timestamp: str) -> str:
    """A `bt_payload` as Braintree encodes one: base64 with a line break every 76 characters."""
    xml = (
        f'<notification><timestamp type="datetime">{timestamp}</timestamp><kind>{kind}</kind>'
        f"<subject><{subject}><id>{ident}</id></{subject}></subject></notification>"
    )
    return base64.encodebytes(xml.encode()).decode()


PROVIDER = provider(
    Braintree,
    sign=sign,
    example=lambda keys: Braintree(public_key="bt-public-example", private_key="bt-private-ex"),
    event=lambda tag: {
        "bt_payload": sample_payload(
            "subscription_charged_successfully", "subscription", tag, "2026-11-30T12:00:00Z"
        )
    },
    signature_header=None,
    form=True,
    signed_in_body=True,
)
