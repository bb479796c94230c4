"""X (Twitter) Account Activity: a GET CRC answered with an HMAC, then signed POSTs.

The handshake (CRC): X sends `GET ?crc_token=<token>` when a webhook is registered, about
every half hour or hour after, and on demand; the answer is JSON,
`{"response_token": "sha256=" + base64(HMAC-SHA256(consumer secret, crc_token))}`, within
3 seconds. Deliveries carry `x-twitter-webhooks-signature: sha256=<base64>`, the same HMAC
over the raw body.

That makes the CRC a signing oracle: a stranger who sends a body as the `crc_token` would
get its signature back. So the token must look like one (at most 512 characters of base64,
digits and `-._~`, as X's are) and anything else is 400: no body this source accepts can pass
(every JSON object holds `{`), so no answer is ever a delivery's signature. With several
secrets (a rotation), the CRC is answered with the first: the one X signs with now.

Deliveries are JSON objects naming the user (`for_user_id`) and one or more lists of events
(`tweet_create_events`, `favorite_events`, `follow_events`, `direct_message_events`, ...).
The key is the one event's id (`id_str` or `id`) and its list, `<list>:<id>`, when the
delivery holds a single event that has one; otherwise (a follow, which has no id, or several
events) `<for_user_id>:<sha256 of the body's JSON>`. X signs no time, so nothing bounds a
replay but the key.
"""

from __future__ import annotations

import base64
import hashlib
from datetime import timedelta
from typing import Any

from hookinbox._errors import Handshake
from hookinbox.sources._handshakes import Query, challenge_text, query_value
from hookinbox.sources._hmac_preset import HMACPreset, HMACPresetSource, declare
from hookinbox.sources._identity import (
    Identity,
    canonical_json,
    event_key,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._signatures import Headers, hmac_digest

SIGNATURE = "x-twitter-webhooks-signature"


class Twitter(HMACPresetSource):
    default_name = "twitter"
    # X retries a failed delivery a few times over minutes (not confirmed); a day's margin.
    redelivery_window = timedelta(days=1)
    # X's recipe: "sha256=" and the base64 HMAC-SHA256 of the raw body, keyed with the app's
    # consumer secret.
    preset = HMACPreset(SIGNATURE, encoding="base64", prefix="sha256=")
    answers_get = True

    def answer_get(self, query: Query, headers: Headers) -> Handshake:
        token = challenge_text(query_value(query, "crc_token"), "crc_token")
        digest = hmac_digest(self._keys[0], token.encode())
        answer = {"response_token": "sha256=" + base64.b64encode(digest).decode()}
        return Handshake(answer)

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        lists = [
            (name, value)
            for name, value in payload.items()
            if name.endswith("_events") and isinstance(value, list)
        ]
        kind = lists[0][0] if len(lists) == 1 else None
        event: Any = lists[0][1][0] if len(lists) == 1 and len(lists[0][1]) == 1 else None
        event_id = _event_id(event)
        if kind is not None and event_id is not None:
            key = f"{kind}:{event_id}"
        else:
            user = payload.get("for_user_id", "")
            digest = hashlib.sha256(canonical_json(payload)).hexdigest()
            key = f"{user if isinstance(user, str | int) else ''}:{digest}"
        stamp = event.get("timestamp_ms") if isinstance(event, dict) else None
        stamp = stamp or (event.get("created_timestamp") if isinstance(event, dict) else None)
        return Identity(
            event_id=event_key(key, "event key"),
            event_type=kind,
            occurred_at=_milliseconds(stamp),
            payload=payload,
        )


def _event_id(event: Any) -> str | None:
    if not isinstance(event, dict):
        return None
    value = event.get("id_str", event.get("id"))
    if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
        return None
    return str(value)


def _milliseconds(value: Any) -> Any:
    """X's `timestamp_ms` and `created_timestamp`: Unix milliseconds, as text."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 15:
        return parse_time(int(value) / 1000)
    return None


PROVIDER = declare(
    Twitter,
    example=lambda keys: Twitter(secret="x-consumer-secret"),
    event=lambda tag: {
        "for_user_id": "2244994945",
        "favorite_events": [
            {"id": f"fav-{tag}", "timestamp_ms": "1700000000000", "favorited_status": {}}
        ],
    },
)
