"""Adyen standard (payments) webhooks: an HMAC signature inside each notification item.

The body is `{"live": "...", "notificationItems": [{"NotificationRequestItem": {...}}, ...]}`.
Each item carries `additionalData.hmacSignature`: the base64 HMAC-SHA256, keyed with the
webhook's HMAC key (hex, as the Customer Area shows it), of eight of the item's fields joined
with `:` — `pspReference`, `originalReference`, `merchantAccountCode`, `merchantReference`,
`amount.value`, `amount.currency`, `eventCode`, `success` — a missing one as empty text. So
the signature covers fields, not bytes: the body is parsed (bounded, as every body is) before
it is verified, and every item must verify, or the whole delivery is refused (401).

Each item is one event, stored under `<pspReference>:<eventCode>:<success>`. Adyen's retries
resend the same item; `success` is in the key because Adyen may send an event again with the
outcome changed (an authorisation reported failed, later successful), which is news, not a
duplicate. `merchantReference` is not: it is the merchant's own label, not unique. Adyen asks
for the body `[accepted]` (`acknowledgement`). Basic authentication, which Adyen can add, is
checked when `username` and `password` are configured.
"""

from __future__ import annotations

import base64
import hmac
import json
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, ClassVar

from hookinbox._errors import BadSignature, ConfigurationError, PayloadError
from hookinbox.sources._base import BatchSource
from hookinbox.sources._identity import Identity, event_key, optional_text, parse_time
from hookinbox.sources._json_slices import JsonSlice, nested_items
from hookinbox.sources._provider import b64_mac, json_headers, provider, secret_key
from hookinbox.sources._secrets import secrets_tuple
from hookinbox.sources._signatures import Headers, hmac_digest, matches_any, signature_items

SIGNED_FIELDS = (
    "pspReference",
    "originalReference",
    "merchantAccountCode",
    "merchantReference",
    "value",
    "currency",
    "eventCode",
    "success",
)


def decode_hmac_key(text: str) -> bytes:
    """An Adyen HMAC key: hex text, as the Customer Area shows it."""
    try:
        key = bytes.fromhex(text.strip())
    except ValueError as exc:
        raise ConfigurationError("an Adyen HMAC key is hex, as the Customer Area shows it") from exc
    if not key:
        raise ConfigurationError("an Adyen HMAC key is hex, as the Customer Area shows it")
    return key


def field_text(value: object) -> str:
    """A signed field as Adyen writes it: a JSON string as it is, a number in decimal, a
    boolean as `true`/`false`, a missing or null field as empty text."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):  # as JavaScript writes a number: 100.0 is 100
        return str(int(value)) if value.is_integer() else json.dumps(value)
    return str(value)


def signing_string(item: dict[str, Any]) -> str:
    """The text an item's signature covers (see the module's docstring)."""
    amount = item.get("amount")
    amount = amount if isinstance(amount, dict) else {}
    values = {**item, "value": amount.get("value"), "currency": amount.get("currency")}
    return ":".join(field_text(values.get(name)) for name in SIGNED_FIELDS)


def notification_items(body: bytes) -> list[JsonSlice]:
    """The `NotificationRequestItem` objects of a body, each with its own bytes, or
    `PayloadError`."""
    return nested_items(body, "notificationItems", "NotificationRequestItem")


class Adyen(BatchSource):
    default_name = "adyen"
    # Adyen retries from a queue for up to 30 days.
    redelivery_window = timedelta(days=30)
    acknowledgement: ClassVar[str | None] = "[accepted]"
    signature_headers = ("authorization",)

    def __init__(
        self,
        *,
        hmac_key: str | Sequence[str],
        username: str | None = None,
        password: str | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        self._keys = [decode_hmac_key(text) for text in secrets_tuple(hmac_key)]
        if (username is None) != (password is None):
            raise ConfigurationError("Adyen basic authentication needs username and password")
        self._basic: bytes | None = None
        if username is not None and password is not None:
            if not username or ":" in username or not password:
                raise ConfigurationError("an Adyen username has no ':' and neither is empty")
            self._basic = f"{username}:{password}".encode()

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        if self._basic is not None:
            self._check_basic(headers)
        try:
            items = [entry.value for entry in notification_items(body)]
        except PayloadError as exc:
            raise BadSignature(f"no signed notification items: {exc.message}") from exc
        if not items:
            raise BadSignature("no signed notification items: the list is empty")
        for item in items:
            additional = item.get("additionalData")
            text = additional.get("hmacSignature") if isinstance(additional, dict) else None
            if not isinstance(text, str) or not text:
                raise BadSignature("a notification item has no additionalData.hmacSignature")
            try:
                candidate = base64.b64decode(text.strip(), validate=True)
            except ValueError as exc:  # binascii.Error, or text that is not ASCII
                raise BadSignature("an hmacSignature is not base64") from exc
            signed = signing_string(item).encode()
            digests = [hmac_digest(key, signed) for key in self._keys]
            if not any([matches_any(digest, [candidate]) for digest in digests]):
                raise BadSignature("a notification item's hmacSignature does not match")

    @staticmethod
    def decode_key(secret: str) -> bytes:
        """The HMAC key of one configured key (hex)."""
        return decode_hmac_key(secret)

    def _check_basic(self, headers: Headers) -> None:
        """One `Authorization: Basic` value (of any repeated) must match, in constant time."""
        assert self._basic is not None
        matched = False
        for value in signature_items(headers, "authorization", what="Authorization"):
            scheme, _, encoded = value.partition(" ")
            try:
                given = base64.b64decode(encoded.strip(), validate=True)
            except ValueError:  # binascii.Error, or text that is not ASCII
                given = b""
            matched |= hmac.compare_digest(given, self._basic) and scheme.lower() == "basic"
        if not matched:
            raise BadSignature("basic authentication does not match")

    def identify_batch(self, headers: Headers, body: bytes) -> list[Identity]:
        # Every item verified (its own HMAC), so one without the fields of its key is Adyen's
        # to explain, and is held as invalid beside the others.
        return self.identify_items(notification_items(body), _event)


def _event(item: dict[str, Any]) -> Identity:
    reference = event_key(item.get("pspReference"), "pspReference")
    code = event_key(item.get("eventCode"), "eventCode")
    success = field_text(item.get("success")) or "-"
    return Identity(
        event_id=event_key(f"{reference}:{code}:{success}", "pspReference:eventCode"),
        event_type=optional_text(code),
        occurred_at=parse_time(item.get("eventDate")),
        payload=item,
    )


_SIGNER_FIELDS = ("pspReference", "originalReference", "merchantAccountCode", "merchantReference")


def _signed_text(value: Any) -> str:
    """A field as Adyen's Java and Node libraries write it into the signed text: missing or
    null as nothing, JSON's true and false, a whole number without a fraction."""
    if value is None:
        return ""
    if isinstance(value, bool | float):
        return json.dumps(int(value) if isinstance(value, float) and value.is_integer() else value)
    return str(value)


def sign(
    source: Adyen, body: bytes, t: int, fields: dict[str, Any]
) -> tuple[dict[str, str], bytes]:
    """Adyen signs each notification item: its `additionalData.hmacSignature` is set (over
    the eight fields of Adyen's recipe) and the body written again as JSON."""
    key = secret_key(source, fields)
    payload = json.loads(body)
    for entry in payload["notificationItems"]:
        item = entry["NotificationRequestItem"]
        amount = item.get("amount") if isinstance(item.get("amount"), dict) else {}
        values = [*(item.get(name) for name in _SIGNER_FIELDS)]
        values += [amount.get("value"), amount.get("currency")]
        values += [item.get("eventCode"), item.get("success")]
        text = ":".join(_signed_text(value) for value in values)
        item.setdefault("additionalData", {})["hmacSignature"] = b64_mac(key, text.encode())
    headers = json_headers(fields)
    username, password = fields.pop("username", None), fields.pop("password", None)
    if source._basic is not None or username is not None:
        default_user, _, default_password = (source._basic or b":").decode().partition(":")
        credentials = f"{username or default_user}:{password or default_password}"
        headers["Authorization"] = "Basic " + base64.b64encode(credentials.encode()).decode()
    return headers, json.dumps(payload).encode()


def example_event(tag: str) -> dict[str, Any]:
    item = {
        "pspReference": tag,
        "eventCode": "AUTHORISATION",
        "success": "true",
        "merchantAccountCode": "Shop",
        "amount": {"value": 100, "currency": "EUR"},
    }
    return {"live": "false", "notificationItems": [{"NotificationRequestItem": item}]}


PROVIDER = provider(
    Adyen,
    sign=sign,
    example=lambda keys: Adyen(
        hmac_key="44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056",
        username="adyen",
        password="pässwörd",
    ),
    event=example_event,
    # Its HMACs are in the body; basic authentication is a header.
    signature_header="Authorization",
    forgery=lambda: {"password": "another-password"},
    batch_key=lambda body: "{pspReference}:AUTHORISATION:true".format(
        **body["notificationItems"][0]["NotificationRequestItem"]
    ),
)
