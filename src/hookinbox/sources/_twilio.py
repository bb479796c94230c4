"""Twilio: `X-Twilio-Signature` = base64 HMAC of the configured URL and the request's content.

Form bodies (`application/x-www-form-urlencoded`): the signed text is the URL followed by every
field name and value, names sorted, each name's distinct values sorted. JSON bodies: Twilio
adds `bodySHA256=<hex SHA-256 of the body>` to the URL's query and signs that URL alone; the
source rebuilds the same URL from the body, so a changed body changes the URL and fails.
Twilio signs URLs both with and without the default port, some of its back ends sign the URL
as JavaScript's `new URL()` writes it (`'` as `%27`), and some sign the query escaped as Node's
`querystring` module escapes it (`,` as `%2C`, `/` as `%2F`): every such form is accepted, as
in Twilio's own validator (twilio-node). The HMAC is SHA-1 with the
auth token, or SHA-256 when the `X-Twilio-Webhooks-Signature-Settings` header names
`algorithm=HMAC_SHA256` (shared keys).

The key is `I-Twilio-Idempotency-Token`, which Twilio keeps across retries of one request;
without it, the status callback's resource and status (docs/sources/twilio.md lists the rules,
and `key_fields` replaces them).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qsl, quote, unquote_plus, urlparse

from hookinbox._errors import BadSignature, ConfigurationError, PayloadError
from hookinbox._payload import FORM, decode_payload, form_fields, media_type
from hookinbox.sources._base import SecretSource
from hookinbox.sources._identity import Identity, event_key, lookup, optional_text
from hookinbox.sources._provider import JSON, b64_mac, body_id, provider, secret_key
from hookinbox.sources._secrets import configured_url
from hookinbox.sources._signatures import Headers, decode_digests, require_match

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


# What WHATWG's URL serializer percent-encodes, besides controls, space and non-ASCII (which
# it encodes everywhere): in the path, and in the query of an http(s) URL.
PATH_ESCAPED = frozenset('"#<>?`{}')
QUERY_ESCAPED = frozenset("\"#<>'")
URL_START = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)([^/]*)(.*)", re.DOTALL)


def whatwg_form(url: str) -> str:
    """`url` as JavaScript's `new URL(url).toString()` writes it, which twilio-node checks too:
    scheme and host in lower case, an empty path as `/`, and in the path and the query the
    characters the URL standard escapes percent-encoded as UTF-8 (`'` as `%27` in a query).
    Escapes already present stay as they are."""
    base, mark, query = url.partition("?")
    start = URL_START.fullmatch(base)
    if start is None:
        return url
    scheme, authority, path = start.groups()
    path = _percent_encode(path or "/", PATH_ESCAPED)
    query = _percent_encode(query, QUERY_ESCAPED)
    return f"{scheme.lower()}{authority.lower()}{path}{mark}{query}"


def _percent_encode(text: str, escaped: frozenset[str]) -> str:
    return "".join(quote(c, safe="") if c in escaped or not " " < c < "\x7f" else c for c in text)


# What Node's `querystring.escape` leaves as it is, besides letters, digits and `-_.~`.
NODE_SAFE = "!'()*"
# A JavaScript object lists integer-like keys (array indices) first, in ascending order.
ARRAY_INDEX = re.compile(r"0|[1-9][0-9]{0,9}")


def node_escaped_query(url: str) -> str:
    """`url` with its query parsed and written again as Node's `querystring` module does it.

    twilio-node checks this form too ("legacy querystring"): values unescaped (`+` is a
    space), then escaped again, so `,` and `/` become `%2C` and `%2F` and a space `%20`.
    Node keeps fields in a plain object: a repeated name's values follow its first place,
    and integer-like names come first.
    """
    base, mark, query = url.partition("?")
    if not mark or not query:
        return url
    fields: dict[str, list[str]] = {}
    for part in query.split("&"):
        if part:
            name, _, value = part.partition("=")
            fields.setdefault(unquote_plus(name), []).append(unquote_plus(value))
    indices = sorted((n for n in fields if _is_index(n)), key=int)
    names = [*indices, *(n for n in fields if not _is_index(n))]
    escaped = "&".join(
        f"{quote(name, safe=NODE_SAFE)}={quote(value, safe=NODE_SAFE)}"
        for name in names
        for value in fields[name]
    )
    return f"{base}?{escaped}"


def _is_index(name: str) -> bool:
    return ARRAY_INDEX.fullmatch(name) is not None and int(name) < 2**32 - 1


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
            plain = url_forms(self.url)
        except ValueError as exc:  # a port that is not a number
            raise ConfigurationError(f"url is not a valid URL: {exc}") from exc
        # twilio-node's forms: as configured, as `new URL()` writes it, and that with the query
        # escaped, each with and without the port. They keep the query's place, so a JSON
        # body's `bodySHA256` (hex, which no escaping changes) is appended to each alike.
        written = [whatwg_form(form) for form in plain]
        escaped = [node_escaped_query(form) for form in written]
        self._url_forms = tuple(dict.fromkeys([*plain, *written, *escaped]))
        self._has_query = bool(urlparse(self.url).query)
        if key_fields is not None and (
            isinstance(key_fields, str) or not key_fields or not all(key_fields)
        ):
            raise ConfigurationError("key_fields must be a non-empty list of field names")
        self.key_fields = tuple(key_fields) if key_fields is not None else None

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        candidates = decode_digests(
            headers, "x-twilio-signature", what="X-Twilio-Signature", encoding="base64"
        )
        algorithm = self._algorithm(headers.get("x-twilio-webhooks-signature-settings", ""))
        if media_type(headers.get("content-type")) == "application/json":
            query = ("&" if self._has_query else "?") + "bodySHA256="
            suffix = (query + hashlib.sha256(body).hexdigest()).encode()
            signed = [form.encode() + suffix for form in self._url_forms]
        else:
            fields = signed_form(body)
            signed = [form.encode() + fields for form in self._url_forms]
        require_match(self._keys, candidates, *signed, algorithm=algorithm)

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


def sign(source: Twilio, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    key = secret_key(source, fields)
    url = fields.pop("url", source.url)
    content_type = fields.pop("content_type", FORM)
    setting = fields.pop("algorithm", "HMAC_SHA1")
    algorithm = {"HMAC_SHA1": "sha1", "HMAC_SHA256": "sha256"}[setting]
    if content_type == JSON:
        joiner = "&" if urlparse(url).query else "?"
        signed = f"{url}{joiner}bodySHA256={hashlib.sha256(body).hexdigest()}".encode()
    else:
        signed = url.encode() + _signed_fields(body)
    headers = {
        "Content-Type": content_type,
        "User-Agent": "TwilioProxy/1.1",
        "X-Twilio-Signature": b64_mac(key, signed, algorithm),
    }
    # False leaves the token out, as some older callbacks do: the source then keys by the
    # resource and its status.
    token = fields.pop("idempotency_token", None)
    if token is not False:
        headers["I-Twilio-Idempotency-Token"] = token or body_id(source, body)
    if setting != "HMAC_SHA1":
        headers["X-Twilio-Webhooks-Signature-Settings"] = f"algorithm={setting}"
    return headers


def _signed_fields(body: bytes) -> bytes:
    """Twilio's documented order: names sorted, each followed by its value."""
    values: dict[str, set[str]] = {}
    for name, value in parse_qsl(body.decode(), keep_blank_values=True):
        values.setdefault(name, set()).add(value)
    return "".join(name + v for name in sorted(values) for v in sorted(values[name])).encode()


PROVIDER = provider(
    Twilio,
    sign=sign,
    example=lambda keys: Twilio(
        secret="tw-example", url="https://example.com/webhooks/twilio?sites=a,b"
    ),
    event=lambda tag: {"MessageSid": f"SM{tag}", "MessageStatus": "sent"},
    signature_header="X-Twilio-Signature",
    form=True,
)
