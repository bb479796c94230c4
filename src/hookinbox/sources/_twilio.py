"""Twilio: `X-Twilio-Signature` = base64 HMAC of the configured URL and the request's content.

Form bodies (`application/x-www-form-urlencoded`): the signed text is the URL followed by every
field name and value, names sorted, each name's distinct values sorted. JSON bodies: Twilio
adds `bodySHA256=<hex SHA-256 of the body>` to the URL's query and signs that URL alone; the
source rebuilds the same URL from the body, so a changed body changes the URL and fails.
Twilio signs URLs both with and without the default port; both forms are accepted, as in
Twilio's own validator. The HMAC is SHA-1 with the auth token, or SHA-256 when the
`X-Twilio-Webhooks-Signature-Settings` header names `algorithm=HMAC_SHA256` (shared keys).

The key is `I-Twilio-Idempotency-Token`, which Twilio keeps across retries of one request;
without it, the status callback's resource and status (docs/sources/twilio.md lists the rules,
and `key_fields` replaces them).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import timedelta
from typing import Any
from urllib.parse import urlparse

from hookinbox._errors import BadSignature, ConfigurationError, PayloadError
from hookinbox._payload import FORM, decode_payload, form_fields, media_type
from hookinbox.sources._base import (
    Headers,
    Identity,
    SecretSource,
    configured_url,
    decode_digest,
    event_key,
    lookup,
    optional_text,
    require_header,
    require_match,
)

ALGORITHMS = {"HMAC_SHA1": "sha1", "HMAC_SHA256": "sha256"}
# (resource id field, status fields, optional extra field, type prefix): how a status callback
# without an idempotency token is keyed and typed; the first rule whose id field is present wins.
KEY_RULES = (
    ("MessageSid", ("MessageStatus", "SmsStatus"), None, "message"),
    ("CallSid", ("CallStatus",), "SequenceNumber", "call"),
)


def url_forms(url: str) -> tuple[str, str]:
    """The URL without and with its port (443 or 80 when none is written).

    Twilio's own validator accepts both, since Twilio does not sign one form consistently.
    Credentials (`user:password@`) and the fragment (`#rc=...` connection overrides) are
    dropped: a request's URL never carries them, and Twilio's validator checks that URL.
    """
    parsed = urlparse(url)._replace(fragment="")
    host = parsed.netloc.rpartition("@")[2]
    if parsed.port is None:
        default = 443 if parsed.scheme == "https" else 80
        bare, with_port = host, f"{host}:{default}"
    else:
        bare, with_port = host.rsplit(":", 1)[0], host
    return (
        parsed._replace(netloc=bare).geturl(),
        parsed._replace(netloc=with_port).geturl(),
    )


def signed_form(body: bytes) -> bytes:
    """Field names and values in Twilio's order, as one text after the URL."""
    try:
        fields = form_fields(body)
    except ValueError as exc:
        raise BadSignature("the form body is not UTF-8") from exc
    parts = []
    for name in sorted(fields):
        values = fields[name]
        for value in sorted(set(values if isinstance(values, list) else [values])):
            parts.append(name + value)
    return "".join(parts).encode()


class Twilio(SecretSource):
    default_name = "twilio"
    # Twilio retries only as a connection override (`#rc=`) asks, within seconds; no resend.
    redelivery_window = timedelta(days=1)
    stored_headers = (
        "x-twilio-signature",
        "x-twilio-webhooks-signature-settings",
        "i-twilio-idempotency-token",
    )
    signature_headers = ("x-twilio-signature", "x-twilio-webhooks-signature-settings")

    def __init__(
        self,
        *,
        secret: str | Sequence[str],
        url: str,
        name: str | None = None,
        key_fields: Sequence[str] | None = None,
    ) -> None:
        super().__init__(secret=secret, name=name)
        self.url = configured_url(url, "url")
        try:
            self._url_forms = url_forms(self.url)
        except ValueError as exc:  # a port that is not a number
            raise ConfigurationError(f"url is not a valid URL: {exc}") from exc
        self._has_query = bool(urlparse(self.url).query)
        if key_fields is not None and (
            isinstance(key_fields, str) or not key_fields or not all(key_fields)
        ):
            raise ConfigurationError("key_fields must be a non-empty list of field names")
        self.key_fields = tuple(key_fields) if key_fields is not None else None

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        candidate = decode_digest(
            require_header(headers, "x-twilio-signature"),
            what="X-Twilio-Signature",
            encoding="base64",
        )
        algorithm = self._algorithm(headers.get("x-twilio-webhooks-signature-settings", ""))
        if media_type(headers.get("content-type")) == "application/json":
            query = ("&" if self._has_query else "?") + "bodySHA256="
            suffix = (query + hashlib.sha256(body).hexdigest()).encode()
            signed = [form.encode() + suffix for form in self._url_forms]
        else:
            fields = signed_form(body)
            signed = [form.encode() + fields for form in self._url_forms]
        require_match(self._keys, [candidate], *signed, algorithm=algorithm)

    @staticmethod
    def _algorithm(settings: str) -> str:
        """`key=...,algorithm=HMAC_SHA256` names the algorithm; none named means HMAC-SHA1."""
        for part in settings.split(","):
            name, sep, value = part.partition("=")
            if sep and name.strip() == "algorithm" and value.strip():
                algorithm = ALGORITHMS.get(value.strip().upper())
                if algorithm is None:
                    raise BadSignature("unsupported X-Twilio-Webhooks-Signature-Settings algorithm")
                return algorithm
        return "sha1"

    def identify(self, headers: Headers, body: bytes) -> Identity:
        try:
            payload = decode_payload(body, headers.get("content-type"))
        except (ValueError, RecursionError) as exc:
            kind = "a form" if media_type(headers.get("content-type")) == FORM else "JSON"
            raise PayloadError(f"body is not valid {kind}") from exc
        token = headers.get("i-twilio-idempotency-token")
        if token:
            key = event_key(token, "I-Twilio-Idempotency-Token header")
        else:
            key = self._derived_key(payload)
        return Identity(
            event_id=key, event_type=_event_type(payload), occurred_at=None, payload=payload
        )

    def _derived_key(self, payload: Any) -> str:
        if not isinstance(payload, dict):
            raise PayloadError("no I-Twilio-Idempotency-Token header and the body is no object")
        if self.key_fields is not None:
            parts = [event_key(lookup(payload, field), field) for field in self.key_fields]
            return event_key(":".join(parts))
        for sid_field, status_fields, extra_field, _kind in KEY_RULES:
            if sid_field not in payload:
                continue
            sid = event_key(payload[sid_field], sid_field)
            status = _first(payload, status_fields)
            parts = [sid, event_key(status, f"{sid_field} status")]
            if extra_field is not None and extra_field in payload:
                parts.append(event_key(payload[extra_field], extra_field))
            return event_key(":".join(parts))
        if "id" in payload:  # a JSON body (an Event Streams CloudEvent) names itself
            return event_key(payload["id"])
        raise PayloadError(
            "no I-Twilio-Idempotency-Token header, and no MessageSid, CallSid or id to key by"
        )


def _first(payload: dict[str, Any], fields: Sequence[str]) -> Any:
    return next((payload[f] for f in fields if payload.get(f)), None)


def _event_type(payload: Any) -> str | None:
    """`message.<status>` or `call.<status>` for a status callback, else a JSON body's `type`."""
    if not isinstance(payload, dict):
        return None
    for sid_field, status_fields, _extra, kind in KEY_RULES:
        status = optional_text(_first(payload, status_fields))
        if sid_field in payload and status is not None:
            return optional_text(f"{kind}.{status}")
    return optional_text(payload.get("type"))
