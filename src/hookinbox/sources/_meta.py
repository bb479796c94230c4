"""Meta (WhatsApp Cloud API, Messenger, Instagram): a GET handshake, then signed POSTs.

The handshake: when a webhook is set up, Meta sends `GET ?hub.mode=subscribe&
hub.verify_token=<the token you typed>&hub.challenge=<a number>`; the answer is the challenge,
as text, with 200, and 403 when the verify token is not yours. The verify token is the only
proof such a GET carries, so it is compared in constant time and a wrong or missing one is
403 before the challenge is even read; a challenge that is missing, longer than 512
characters or holds anything but base64 and `-._~` is 400 (Meta's is a number).

Deliveries: `X-Hub-Signature-256: sha256=<hex>`, the HMAC-SHA256 of the raw body keyed with
the app secret. Nothing signed says when it was sent, so nothing bounds a replay but the key.

A delivery is a batch: `{"object": ..., "entry": [...]}`, and each entry is stored as an
event of its own. Its key:
- WhatsApp: the entry's one message id (`wamid...`) or, for a status, the message id and the
  status (`wamid...:delivered`: one message is sent, delivered and read, three events). Meta
  documents these ids as the way to recognise a message sent again.
- Messenger and Instagram: the entry's one `messaging[].message.mid`.
- Anything else (an entry holding several messages, a change with no id such as a template
  status): `<object>:<entry id>:<sha256 of the entry's JSON>`. A retry repeats the entry, so
  it is a duplicate; two entries differ in their times and ids, so they never share a key.
The type is the first change's `field` (`messages`), or `messaging` for Messenger's shape;
the time the entry's `time` (seconds, or Messenger's milliseconds).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from hookinbox._errors import BadSignature, Handshake, PayloadError
from hookinbox.sources._handshakes import Query, challenge_text, query_value
from hookinbox.sources._hmac_preset import BatchHMACPresetSource, HMACPreset, declare
from hookinbox.sources._identity import (
    Identity,
    canonical_json,
    event_key,
    lookup,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._json_slices import member_items
from hookinbox.sources._secrets import utf8_keys
from hookinbox.sources._signatures import Headers, matches_secret


class Meta(BatchHMACPresetSource):
    default_name = "meta"
    # WhatsApp retries a delivery that was not answered 200 for up to 7 days.
    redelivery_window = timedelta(days=8)
    # Meta's recipe: "sha256=" and the hex HMAC-SHA256 of the raw body with the app secret.
    preset = HMACPreset("X-Hub-Signature-256", prefix="sha256=")
    answers_get = True

    def __init__(
        self,
        *,
        secret: str | Sequence[str],
        verify_token: str | Sequence[str],
        name: str | None = None,
    ) -> None:
        super().__init__(secret=secret, name=name)
        self._verify_tokens = utf8_keys(verify_token)

    def answer_get(self, query: Query, headers: Headers) -> Handshake:
        mode = query_value(query, "hub.mode")
        token = query_value(query, "hub.verify_token")
        if mode is None and token is None:
            raise PayloadError("not Meta's verification request: no hub.mode")
        if token is None or not matches_secret(token, self._verify_tokens):
            raise BadSignature("hub.verify_token is missing or not the configured one")
        if mode != "subscribe":
            raise PayloadError("hub.mode is not subscribe")
        challenge = challenge_text(query_value(query, "hub.challenge"), "hub.challenge")
        return Handshake(challenge)

    def identify_batch(self, headers: Headers, body: bytes) -> list[Identity]:
        items = member_items(body, "entry")
        # The product (`whatsapp_business_account`, `page`, `instagram`): part of a derived key.
        kind = optional_text(parse_json_object(body).get("object"))
        return self.identify_items(items, lambda entry: _entry(kind, entry))


def entry_ids(entry: dict[str, Any]) -> list[str]:
    """The ids Meta documents for what an entry carries: WhatsApp's message ids and
    `<message id>:<status>` for statuses, Messenger's and Instagram's `message.mid`."""
    ids: list[str] = []
    changes = entry.get("changes")
    for change in changes if isinstance(changes, list) else ():
        value = change.get("value") if isinstance(change, dict) else None
        if not isinstance(value, dict):
            continue
        for message in _objects(value.get("messages")):
            ids.append(_text(message.get("id")))
        for status in _objects(value.get("statuses")):
            ids.append(f"{_text(status.get('id'))}:{_text(status.get('status'))}")
    for item in _objects(entry.get("messaging")):
        mid = lookup(item, "message.mid")
        if mid is not None:
            ids.append(_text(mid))
    return ids


def _objects(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _entry(kind: str | None, entry: Any) -> Identity:
    if not isinstance(entry, dict):
        raise PayloadError("an entry of the delivery is not a JSON object")
    ids = entry_ids(entry)
    if len(ids) == 1 and not ids[0].startswith(":") and not ids[0].endswith(":"):
        key = event_key(ids[0], "message id")
    else:
        entry_id = event_key(entry.get("id"), "entry id")
        digest = hashlib.sha256(canonical_json(entry)).hexdigest()
        key = event_key(f"{kind or 'meta'}:{entry_id}:{digest}", "entry key")
    changes = entry.get("changes")
    first = changes[0] if isinstance(changes, list) and changes else None
    field = first.get("field") if isinstance(first, dict) else None
    if field is None and isinstance(entry.get("messaging"), list):
        field = "messaging"
    return Identity(
        event_id=key,
        event_type=optional_text(field),
        occurred_at=_entry_time(entry.get("time")),
        payload=entry,
    )


def _entry_time(value: Any) -> datetime | None:
    """Seconds (WhatsApp, Instagram) or milliseconds (Messenger): told apart by size."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 10**11:
        value = value / 1000
    return parse_time(value)


def _event(tag: str) -> dict[str, Any]:
    message: dict[str, Any] = {"from": "15550001111", "id": f"wamid.{tag}", "type": "text"}
    message |= {"timestamp": "1700000000", "text": {"body": "hello"}}
    value = {"messaging_product": "whatsapp", "metadata": {"phone_number_id": "106540352242922"}}
    change = {"field": "messages", "value": {**value, "messages": [message]}}
    return {
        "object": "whatsapp_business_account",
        "entry": [{"id": "102290129340398", "changes": [change]}],
    }


PROVIDER = declare(
    Meta,
    example=lambda keys: Meta(secret="meta-app-secret", verify_token="meta-verify-token"),
    event=_event,
    batch_key=lambda event: str(event["entry"][0]["changes"][0]["value"]["messages"][0]["id"]),
)
