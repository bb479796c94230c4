"""One registry of signers: a delivery signed exactly as each provider signs it.

`sign(source, body)` reads what the configured source needs (its first secret, the URL Square
or Twilio signs, the header names an `HMACSource` was given) and builds the request the
provider would send: header names in the provider's casing, its id and timestamp headers, a
form body where the provider posts a form. The HMACs are computed here with `hmac` and
`hashlib`, from each provider's documented recipe, never through the sources' own helpers, and
the project's tests check every signer against the provider's official verifier: a mistake in
a source and the same mistake in its signer cannot agree unseen.

Ids that name the event (GitHub's delivery, Shopify's event id, a Standard Webhooks message
id, GitLab's idempotency key, Twilio's token, Linear's delivery) default to a digest of the
body, so signing the same body twice is a redelivery of one event, and two bodies are two
events. Pass the field to choose it. Ids that are new on each transmission (PayPal's
transmission id, GitLab's webhook UUID, Mailgun's token) are new on each call.

Where a provider signs inside the body (Mailgun's signature block, Linear's
`webhookTimestamp`), the signer returns the body it sends with the headers.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import importlib
import json
import secrets
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlparse

from hookinbox.sources import (
    Adyen,
    Calendly,
    Discord,
    GitHub,
    GitLab,
    GitLabSigned,
    HMACSource,
    HubSpot,
    Intercom,
    LemonSqueezy,
    Linear,
    Mailgun,
    Mollie,
    MollieClassic,
    Paddle,
    Postmark,
    Shopify,
    Slack,
    Source,
    Square,
    StandardWebhooks,
    Stripe,
    Twilio,
    Twitch,
    Typeform,
    WorkOS,
    Zoom,
)
from hookinbox.sources._svix_apps import Clerk, Resend
from hookinbox.sources._twitch import NOTIFICATION, message_type

Body = bytes | str | Mapping[str, Any] | list[Any]
SignerFunction = Callable[
    [Any, bytes, int, dict[str, Any]], dict[str, str] | tuple[dict[str, str], bytes]
]
"""`(source, body, unix seconds, fields) -> headers`, or `(headers, body)` where the provider
signs inside the body; pops the fields it understands."""
T = TypeVar("T", bound=SignerFunction)

JSON = "application/json"
FORM = "application/x-www-form-urlencoded"
_NAMESPACE = uuid.UUID("6f1c1e8e-51f3-4a4e-9d0c-2b9a4f7f0b11")

_SIGNERS: dict[type[Source], SignerFunction] = {}
_LAZY = {
    "hookinbox.sources._paypal": "hookinbox.testing._paypal",
    "hookinbox.sources._sendgrid": "hookinbox.testing._sendgrid",
}
_FORM_SOURCES: tuple[type[Source], ...] = (Twilio, MollieClassic)


def register_signer(source_class: type[Source]) -> Callable[[T], T]:
    """Sign deliveries for `source_class` (and its subclasses without a signer of their own)
    with the decorated `function(source, body, timestamp, fields) -> headers`."""

    def register(function: T) -> T:
        _SIGNERS[source_class] = function
        return function

    return register


def signer_for(source: Source) -> SignerFunction:
    for cls in type(source).__mro__:
        if cls not in _SIGNERS and cls.__module__ in _LAZY:  # needs an extra: loaded on use
            importlib.import_module(_LAZY[cls.__module__])
        function = _SIGNERS.get(cls)
        if function is not None:
            return function
    raise TypeError(
        f"no signer for {type(source).__name__}: register one with "
        "hookinbox.testing.register_signer"
    )


def sign(
    source: Source, body: Body, *, at: float | datetime | None = None, **fields: Any
) -> tuple[dict[str, str], bytes]:
    """The headers and body `source`'s provider would send for `body`, signed at `at`.

    `body` is bytes or text as sent, or a JSON value (a form for Twilio and Mollie classic).
    `at` is the signing time (a datetime or Unix seconds; default now). `fields` set what the
    provider puts in its headers (`event_id`, `topic`, `event`, `message_id`, ...: see
    docs/testing.md), and `secret=` signs with another secret than the source's first.
    """
    if not isinstance(source, Source):
        raise TypeError(f"sign() takes a configured source such as Stripe(...), not {source!r}")
    function = signer_for(source)
    raw = encode_body(source, body, fields)
    timestamp = _timestamp(at)
    remaining = dict(fields)
    signed = function(source, raw, timestamp, remaining)
    headers, raw = signed if isinstance(signed, tuple) else (signed, raw)
    if remaining:
        names = ", ".join(sorted(remaining))
        raise TypeError(f"sign() got fields {type(source).__name__} does not use: {names}")
    return headers, raw


def encode_body(source: Source, body: Body, fields: Mapping[str, Any]) -> bytes:
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    if isinstance(source, _FORM_SOURCES) and fields.get("content_type", FORM) == FORM:
        if not isinstance(body, Mapping):
            raise TypeError("a form body is a mapping of field names to values")
        return urlencode(body, doseq=True).encode()
    return json.dumps(body).encode()


def _timestamp(at: float | datetime | None) -> int:
    if at is None:
        return int(time.time())
    if isinstance(at, datetime):
        return int(at.timestamp())
    return int(at)


def body_id(source: Source, body: bytes, prefix: str = "") -> str:
    """A stable id for a body: the same body is the same event (a redelivery)."""
    return prefix + str(uuid.uuid5(_NAMESPACE, f"{source.name}:{hashlib.sha256(body).hexdigest()}"))


def secret_key(source: Any, fields: dict[str, Any]) -> bytes:
    """The HMAC key: the `secret` field (as the provider's secret is written) or the source's
    first configured secret."""
    secret = fields.pop("secret", None)
    if secret is None:
        return bytes(source._keys[0])
    return bytes(source.decode_key(secret) if hasattr(source, "decode_key") else secret.encode())


def _mac(key: bytes, message: bytes, algorithm: str = "sha256") -> bytes:
    return hmac.new(key, message, algorithm).digest()


def _hex(key: bytes, message: bytes, algorithm: str = "sha256") -> str:
    return _mac(key, message, algorithm).hex()


def _b64(key: bytes, message: bytes, algorithm: str = "sha256") -> str:
    return base64.b64encode(_mac(key, message, algorithm)).decode()


def _iso(timestamp: int) -> str:
    return (
        datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    )


def _json_headers(fields: dict[str, Any]) -> dict[str, str]:
    return {"Content-Type": fields.pop("content_type", JSON)}


def _ed25519(source: Source, public: Any, message: bytes, fields: dict[str, Any]) -> bytes:
    # Imported on use: only Ed25519 signers need cryptography (the `crypto` extra).
    from hookinbox.testing._ed25519 import ed25519_signature

    return ed25519_signature(source, public, message, fields)


# -- one signer per provider --------------------------------------------------------------------


@register_signer(Stripe)
def _stripe(source: Stripe, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    digest = _hex(secret_key(source, fields), f"{t}.".encode() + body)
    return {
        "Content-Type": "application/json; charset=utf-8",
        "User-Agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
        "Stripe-Signature": f"t={t},v1={digest}",
    }


@register_signer(Paddle)
def _paddle(source: Paddle, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    digest = _hex(secret_key(source, fields), f"{t}:".encode() + body)
    return {**_json_headers(fields), "Paddle-Signature": f"ts={t};h1={digest}"}


@register_signer(Shopify)
def _shopify(source: Shopify, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    key = secret_key(source, fields)
    event_id = fields.pop("event_id", None) or body_id(source, body)
    return {
        **_json_headers(fields),
        "X-Shopify-Topic": fields.pop("topic", "orders/create"),
        "X-Shopify-Hmac-Sha256": _b64(key, body),
        "X-Shopify-Shop-Domain": fields.pop("shop_domain", "example.myshopify.com"),
        "X-Shopify-API-Version": fields.pop("api_version", "2024-07"),
        "X-Shopify-Webhook-Id": fields.pop("webhook_id", str(uuid.uuid4())),
        "X-Shopify-Event-Id": event_id,
        "X-Shopify-Triggered-At": _iso(t),
    }


@register_signer(GitHub)
def _github(source: GitHub, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    key = secret_key(source, fields)
    return {
        **_json_headers(fields),
        "User-Agent": "GitHub-Hookshot/7e5b2a1",
        "X-GitHub-Delivery": fields.pop("delivery", None) or body_id(source, body),
        "X-GitHub-Event": fields.pop("event", "push"),
        "X-GitHub-Hook-ID": str(fields.pop("hook_id", "471198234")),
        # The legacy SHA-1 header GitHub still sends next to the SHA-256 one.
        "X-Hub-Signature": "sha1=" + _hex(key, body, "sha1"),
        "X-Hub-Signature-256": "sha256=" + _hex(key, body),
    }


def _standard_headers(
    source: StandardWebhooks, body: bytes, t: int, fields: dict[str, Any], prefix: str = "webhook"
) -> dict[str, str]:
    message_id = fields.pop("message_id", None) or body_id(source, body, "msg_")
    signed = f"{message_id}.{t}.".encode() + body
    # One entry per scheme the source trusts, space-separated: `v1` with its secret, `v1a`
    # with its public key's private half (a sender moving to v1a signs with both).
    signatures = []
    if source._keys or "secret" in fields:
        signatures.append("v1," + _b64(secret_key(source, fields), signed))
    if source._public is not None or "private_key" in fields:
        signature = _ed25519(source, source._public, signed, fields)
        signatures.append("v1a," + base64.b64encode(signature).decode())
    return {
        **_json_headers(fields),
        f"{prefix}-id": message_id,
        f"{prefix}-timestamp": str(t),
        f"{prefix}-signature": " ".join(signatures),
    }


@register_signer(Discord)
def _discord(source: Discord, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    signature = _ed25519(source, source._public, str(t).encode() + body, fields)
    return {
        **_json_headers(fields),
        "User-Agent": "Discord-Interactions/1.0 (+https://discord.com)",
        "X-Signature-Ed25519": signature.hex(),
        "X-Signature-Timestamp": str(t),
    }


@register_signer(StandardWebhooks)
def _standard(
    source: StandardWebhooks, body: bytes, t: int, fields: dict[str, Any]
) -> dict[str, str]:
    return _standard_headers(source, body, t, fields)


@register_signer(Resend)
@register_signer(Clerk)
def _svix(source: StandardWebhooks, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    # Svix's own header names, as Resend and Clerk send them.
    return _standard_headers(source, body, t, fields, prefix="svix")


@register_signer(GitLabSigned)
def _gitlab_signed(
    source: GitLabSigned, body: bytes, t: int, fields: dict[str, Any]
) -> dict[str, str]:
    event = fields.pop("event", "Push Hook")
    headers = _standard_headers(source, body, t, fields)
    # GitLab sends the delivery's Idempotency-Key as the signed webhook-id.
    return {**headers, "X-Gitlab-Event": event, "Idempotency-Key": headers["webhook-id"]}


@register_signer(GitLab)
def _gitlab(source: GitLab, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    token = fields.pop("secret", None) or source._tokens[0]
    key = fields.pop("idempotency_key", None) or body_id(source, body)
    return {
        **_json_headers(fields),
        "User-Agent": "GitLab/17.5.0",
        "X-Gitlab-Event": fields.pop("event", "Push Hook"),
        "X-Gitlab-Token": token,
        "X-Gitlab-Instance": fields.pop("instance", "https://gitlab.example.com"),
        "X-Gitlab-Webhook-UUID": str(uuid.uuid4()),  # new on every attempt: never the key
        "X-Gitlab-Event-UUID": key,
        "Idempotency-Key": key,
    }


@register_signer(Slack)
def _slack(source: Slack, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    digest = _hex(secret_key(source, fields), f"v0:{t}:".encode() + body)
    headers = {
        **_json_headers(fields),
        "X-Slack-Signature": f"v0={digest}",
        "X-Slack-Request-Timestamp": str(t),
    }
    retry = fields.pop("retry", 0)
    if retry:
        headers |= {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"}
    return headers


@register_signer(Zoom)
def _zoom(source: Zoom, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    digest = _hex(secret_key(source, fields), f"v0:{t}:".encode() + body)
    return {
        **_json_headers(fields),
        "User-Agent": "Zoom Marketplace/1.0a",
        "x-zm-signature": f"v0={digest}",
        "x-zm-request-timestamp": str(t),
    }


@register_signer(Twitch)
def _twitch(source: Twitch, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    key = secret_key(source, fields)
    message_id = fields.pop("message_id", None) or body_id(source, body)
    timestamp = _iso(t).replace("Z", ".000000000Z")  # Twitch's nanoseconds
    kind = fields.pop("message_type", None) or _twitch_type(body)
    headers = {
        **_json_headers(fields),
        "Twitch-Eventsub-Message-Id": message_id,
        "Twitch-Eventsub-Message-Retry": "0",
        "Twitch-Eventsub-Message-Type": kind,
        "Twitch-Eventsub-Message-Signature": "sha256="
        + _hex(key, (message_id + timestamp).encode() + body),
        "Twitch-Eventsub-Message-Timestamp": timestamp,
    }
    try:
        subscription = json.loads(body)["subscription"]
        headers["Twitch-Eventsub-Subscription-Type"] = str(subscription["type"])
        headers["Twitch-Eventsub-Subscription-Version"] = str(subscription["version"])
    except (ValueError, KeyError, TypeError):
        pass
    return headers


def _twitch_type(body: bytes) -> str:
    """The message type Twitch sends a body of this shape under (the source checks it)."""
    try:
        payload = json.loads(body)
    except ValueError:
        return NOTIFICATION
    return message_type(payload) if isinstance(payload, dict) else NOTIFICATION


@register_signer(Square)
def _square(source: Square, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    url = fields.pop("notification_url", source.notification_url)
    signature = _b64(secret_key(source, fields), url.encode() + body)
    return {
        **_json_headers(fields),
        "square-version": fields.pop("square_version", "2024-10-17"),
        "x-square-hmacsha256-signature": signature,
    }


@register_signer(LemonSqueezy)
def _lemonsqueezy(
    source: LemonSqueezy, body: bytes, t: int, fields: dict[str, Any]
) -> dict[str, str]:
    headers = {**_json_headers(fields), "X-Signature": _hex(secret_key(source, fields), body)}
    event_name = fields.pop("event_name", None)
    if event_name is None:
        try:
            event_name = json.loads(body)["meta"]["event_name"]
        except (ValueError, KeyError, TypeError):
            event_name = None
    if event_name is not None:
        headers["X-Event-Name"] = str(event_name)
    return headers


@register_signer(Mollie)
def _mollie(source: Mollie, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    digest = _hex(secret_key(source, fields), body)
    return {**_json_headers(fields), "X-Mollie-Signature": f"sha256={digest}"}


@register_signer(MollieClassic)
def _mollie_classic(
    source: MollieClassic, body: bytes, t: int, fields: dict[str, Any]
) -> dict[str, str]:
    return {"Content-Type": FORM}  # unsigned: the source fetches the resource to verify


@register_signer(Twilio)
def _twilio(source: Twilio, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    key = secret_key(source, fields)
    url = fields.pop("url", source.url)
    content_type = fields.pop("content_type", FORM)
    setting = fields.pop("algorithm", "HMAC_SHA1")
    algorithm = {"HMAC_SHA1": "sha1", "HMAC_SHA256": "sha256"}[setting]
    if content_type == JSON:
        joiner = "&" if urlparse(url).query else "?"
        signed = f"{url}{joiner}bodySHA256={hashlib.sha256(body).hexdigest()}".encode()
    else:
        signed = url.encode() + _twilio_fields(body)
    headers = {
        "Content-Type": content_type,
        "User-Agent": "TwilioProxy/1.1",
        "X-Twilio-Signature": _b64(key, signed, algorithm),
    }
    # False leaves the token out, as some older callbacks do: the source then keys by the
    # resource and its status.
    token = fields.pop("idempotency_token", None)
    if token is not False:
        headers["I-Twilio-Idempotency-Token"] = token or body_id(source, body)
    if setting != "HMAC_SHA1":
        headers["X-Twilio-Webhooks-Signature-Settings"] = f"algorithm={setting}"
    return headers


def _twilio_fields(body: bytes) -> bytes:
    """Twilio's documented order: names sorted, each followed by its value."""
    values: dict[str, set[str]] = {}
    for name, value in parse_qsl(body.decode(), keep_blank_values=True):
        values.setdefault(name, set()).add(value)
    return "".join(name + v for name in sorted(values) for v in sorted(values[name])).encode()


@register_signer(HMACSource)
def _hmac_source(source: HMACSource, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    key = secret_key(source, fields)
    signed = f"{t}.".encode() + body if source.timestamp_header else body
    mac = _mac(key, signed, source.algorithm)
    encoded = mac.hex() if source.encoding == "hex" else base64.b64encode(mac).decode()
    headers = {**_json_headers(fields), source.signature_header: source.signature_prefix + encoded}
    if source.timestamp_header:
        headers[source.timestamp_header] = str(t)
    if source.id_header:
        headers[source.id_header] = fields.pop("event_id", None) or body_id(source, body)
    if source.type_header:
        headers[source.type_header] = fields.pop("event_type", "event")
    return headers


# -- issue 23, round two: HMAC and credential sources --------------------------------------------


@register_signer(WorkOS)
def _workos(source: WorkOS, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    milliseconds = t * 1000  # WorkOS signs its timestamp in milliseconds
    digest = _hex(secret_key(source, fields), f"{milliseconds}.".encode() + body)
    return {**_json_headers(fields), "WorkOS-Signature": f"t={milliseconds}, v1={digest}"}


@register_signer(Calendly)
def _calendly(source: Calendly, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    digest = _hex(secret_key(source, fields), f"{t}.".encode() + body)
    return {**_json_headers(fields), "Calendly-Webhook-Signature": f"t={t},v1={digest}"}


@register_signer(Intercom)
def _intercom(source: Intercom, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    digest = _hex(secret_key(source, fields), body, "sha1")
    return {**_json_headers(fields), "X-Hub-Signature": f"sha1={digest}"}


@register_signer(Typeform)
def _typeform(source: Typeform, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    signature = _b64(secret_key(source, fields), body)
    return {**_json_headers(fields), "Typeform-Signature": f"sha256={signature}"}


@register_signer(Linear)
def _linear(
    source: Linear, body: bytes, t: int, fields: dict[str, Any]
) -> tuple[dict[str, str], bytes]:
    key = secret_key(source, fields)
    delivery = fields.pop("delivery", None) or body_id(source, body)  # before the stamp
    sent = body
    payload = _json_object(body)
    if payload is not None and "webhookTimestamp" not in payload:
        # Linear puts the sending time, in milliseconds, in the body it signs.
        sent = json.dumps({**payload, "webhookTimestamp": t * 1000}).encode()
    event = fields.pop("event", None) or (payload or {}).get("type") or "Issue"
    headers = {
        **_json_headers(fields),
        "Linear-Delivery": delivery,
        "Linear-Event": str(event),
        "Linear-Signature": _hex(key, sent),
    }
    return headers, sent


@register_signer(Mailgun)
def _mailgun(
    source: Mailgun, body: bytes, t: int, fields: dict[str, Any]
) -> tuple[dict[str, str], bytes]:
    payload = _json_object(body)
    if payload is None:
        raise TypeError("Mailgun signs inside a JSON object body: pass a mapping")
    token = fields.pop("token", None) or secrets.token_hex(25)  # 50 characters, new each time
    digest = _hex(secret_key(source, fields), f"{t}{token}".encode())
    block = {"timestamp": str(t), "token": token, "signature": digest}
    sent = json.dumps({**payload, "signature": block}).encode()
    return _json_headers(fields), sent


@register_signer(Postmark)
def _postmark(source: Postmark, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    username = fields.pop("username", source.username)
    password = fields.pop("secret", None) or source._passwords[0]
    credentials = base64.b64encode(f"{username}:{password}".encode()).decode()
    return {
        **_json_headers(fields),
        "User-Agent": "Postmark",
        "Authorization": f"Basic {credentials}",
    }


def _json_object(body: bytes) -> dict[str, Any] | None:
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return payload if isinstance(payload, dict) else None


# HubSpot signs the URI with these escapes decoded (HubSpot's "validating requests" page).
_HUBSPOT_DECODED = {"%3A": ":", "%2F": "/", "%3F": "?", "%40": "@", "%21": "!", "%24": "$"}
_HUBSPOT_DECODED |= {"%27": "'", "%28": "(", "%29": ")", "%2A": "*", "%2C": ",", "%3B": ";"}


@register_signer(HubSpot)
def _hubspot(source: HubSpot, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    url = fields.pop("url", source.url)
    for escape, character in _HUBSPOT_DECODED.items():
        url = url.replace(escape, character).replace(escape.lower(), character)
    milliseconds = str(fields.pop("milliseconds", t * 1000))
    message = b"POST" + url.encode() + body + milliseconds.encode()
    return {
        **_json_headers(fields),
        "X-HubSpot-Signature-v3": _b64(secret_key(source, fields), message),
        "X-HubSpot-Request-Timestamp": milliseconds,
        "X-HubSpot-Signature-Version": "v3",
    }


_ADYEN_FIELDS = ("pspReference", "originalReference", "merchantAccountCode", "merchantReference")


def _adyen_text(value: Any) -> str:
    """A field as Adyen's Java and Node libraries write it into the signed text: missing or
    null as nothing, JSON's true and false, a whole number without a fraction."""
    if value is None:
        return ""
    if isinstance(value, bool | float):
        return json.dumps(int(value) if isinstance(value, float) and value.is_integer() else value)
    return str(value)


@register_signer(Adyen)
def _adyen(
    source: Adyen, body: bytes, t: int, fields: dict[str, Any]
) -> tuple[dict[str, str], bytes]:
    """Adyen signs each notification item: its `additionalData.hmacSignature` is set (over
    the eight fields of Adyen's recipe) and the body written again as JSON."""
    key = secret_key(source, fields)
    payload = json.loads(body)
    for entry in payload["notificationItems"]:
        item = entry["NotificationRequestItem"]
        amount = item.get("amount") if isinstance(item.get("amount"), dict) else {}
        values = [*(item.get(name) for name in _ADYEN_FIELDS)]
        values += [amount.get("value"), amount.get("currency")]
        values += [item.get("eventCode"), item.get("success")]
        text = ":".join(_adyen_text(value) for value in values)
        item.setdefault("additionalData", {})["hmacSignature"] = _b64(key, text.encode())
    headers = _json_headers(fields)
    username, password = fields.pop("username", None), fields.pop("password", None)
    if source._basic is not None or username is not None:
        default_user, _, default_password = (source._basic or b":").decode().partition(":")
        credentials = f"{username or default_user}:{password or default_password}"
        headers["Authorization"] = "Basic " + base64.b64encode(credentials.encode()).decode()
    return headers, json.dumps(payload).encode()
