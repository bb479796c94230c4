"""DocuSign Connect (JSON SIM, HMAC): `X-DocuSign-Signature-1`, `-2`, ..., each the base64
HMAC-SHA256 of the body under one of the account's Connect keys.

DocuSign sends one numbered header per active Connect key, so a rotation is a second header
rather than a second entry in one. The headers `-1` to `-MAX_SIGNATURES` are read (16 keys is
far more than an account rotates through; DocuSign allows many more): every value of each is
a candidate for every configured secret, compared with one HMAC per secret. A header past
the sixteenth is not read, so a delivery signed only there is refused; `MAX_SIGNATURES`
candidates in all is the cap, as for every list of signatures. DocuSign signs no timestamp.

The body names no delivery id. A JSON SIM message names its `event` (`envelope-completed`),
the envelope (`data.envelopeId`), for recipient events the recipient (`data.recipientId`),
and when the message was made (`generatedDateTime`); the key is those joined. DocuSign counts
its attempts in the body (`retryCount`), so a retry is told from another event by the body
without that counter (`Identity.fingerprint`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hookinbox._errors import MissingHeader
from hookinbox.sources._base import SecretSource
from hookinbox.sources._identity import (
    Identity,
    event_key,
    fingerprint_without,
    lookup,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._provider import b64_mac, json_headers, provider
from hookinbox.sources._signatures import (
    MAX_SIGNATURES,
    Headers,
    check_signature_count,
    decode_digests,
    require_match,
)

SIGNATURE_HEADERS = tuple(f"x-docusign-signature-{n}" for n in range(1, MAX_SIGNATURES + 1))
ATTEMPT_FIELDS = ("retryCount",)
"""The JSON SIM fields about the attempt rather than the event."""


class DocuSign(SecretSource):
    default_name = "docusign"
    # Connect retries failed messages (its schedule is not confirmed); a failure can also
    # be republished by hand from the account's Connect log. A week covers both.
    redelivery_window = timedelta(days=7)
    stored_headers = (*SIGNATURE_HEADERS, "x-authorization-digest", "x-docusign-accountid")
    signature_headers = SIGNATURE_HEADERS

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        candidates: list[bytes] = []
        for name in SIGNATURE_HEADERS:
            try:
                candidates += decode_digests(headers, name, what=name, encoding="base64")
            except MissingHeader:
                continue
            check_signature_count(len(candidates), "X-DocuSign-Signature-N")
        if not candidates:
            raise MissingHeader(f"missing header {SIGNATURE_HEADERS[0]}")
        require_match(self._keys, candidates, body)

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        event = event_key(payload.get("event"), "event")
        envelope = event_key(lookup(payload, "data.envelopeId"), "data.envelopeId")
        recipient = lookup(payload, "data.recipientId")
        parts = [event, envelope]
        if recipient is not None:
            parts.append(event_key(recipient, "data.recipientId"))
        parts.append(event_key(payload.get("generatedDateTime"), "generatedDateTime"))
        return Identity(
            event_id=event_key(":".join(parts)),
            event_type=optional_text(event),
            occurred_at=parse_time(payload.get("generatedDateTime")),
            payload=payload,
            fingerprint=fingerprint_without(payload, *ATTEMPT_FIELDS),
        )


def sign(source: DocuSign, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    # DocuSign's recipe: the base64 HMAC-SHA256 of the body, one numbered header per key.
    secret = fields.pop("secret", None)
    keys = [secret.encode()] if secret is not None else source._keys
    headers = {**json_headers(fields), "X-Authorization-Digest": "HMACSHA256"}
    for number, key in enumerate(keys[:MAX_SIGNATURES], start=1):
        headers[f"X-DocuSign-Signature-{number}"] = b64_mac(key, body)
    return headers


def _event(tag: str) -> dict[str, Any]:
    return {
        "event": "envelope-completed",
        "apiVersion": "v2.1",
        "uri": f"/restapi/v2.1/accounts/acc-1/envelopes/{tag}",
        "retryCount": 0,
        "configurationId": 10418904,
        "generatedDateTime": "2023-11-14T22:13:20.0000000Z",
        "data": {"accountId": "acc-1", "userId": "user-1", "envelopeId": tag},
    }


PROVIDER = provider(
    DocuSign,
    sign=sign,
    example=lambda keys: DocuSign(secret="docusign-connect-example"),
    event=_event,
    signature_header="X-DocuSign-Signature-1",
)
