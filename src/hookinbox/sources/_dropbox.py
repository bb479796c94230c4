"""Dropbox: a GET challenge echoed, then `X-Dropbox-Signature` (hex HMAC-SHA256 of the body).

The handshake: when a webhook URI is added, Dropbox sends `GET ?challenge=<random string>` and
wants the challenge back as the body, `Content-Type: text/plain` and
`X-Content-Type-Options: nosniff` (Dropbox's advice against a reflected XSS). The request
carries no proof at all, so anyone can have the endpoint echo a string: the echo is bounded
(512 characters, base64 and `-._~` only; anything else is 400) and answered as text that a
browser does not sniff.

Deliveries: `X-Dropbox-Signature` is the hex HMAC-SHA256 of the raw body keyed with the app
secret. Nothing signed says when it was sent.

The key: a notification names no change and has no id. It says only that these accounts
(`list_folder.accounts`) have something new; the handler asks Dropbox what, with its cursor
(`files/list_folder/continue`). A key from the body alone would be wrong: the same accounts
changing again an hour later send the same body, which would be taken for a duplicate and
never handled, and a change lost. So each delivery is its own event, keyed by the body's
digest and the millisecond it arrived (`<sha256>:<ms>`): a retry is handled again, which a
wake-up that reads from a cursor makes harmless, and no notification is ever dropped.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import replace
from datetime import timedelta

from hookinbox._errors import Handshake
from hookinbox.sources._handshakes import Query, challenge_text, query_value
from hookinbox.sources._hmac_preset import HMACPreset, HMACPresetSource, declare
from hookinbox.sources._identity import Identity, optional_text, parse_json_object, parse_time
from hookinbox.sources._signatures import Headers


class Dropbox(HMACPresetSource):
    default_name = "dropbox"
    # Retried with backoff over about ten minutes, then reported as failed.
    redelivery_window = timedelta(days=1)
    # Dropbox's recipe: the hex HMAC-SHA256 of the raw body, keyed with the app secret.
    preset = HMACPreset("X-Dropbox-Signature")
    answers_get = True

    def answer_get(self, query: Query, headers: Headers) -> Handshake:
        challenge = challenge_text(query_value(query, "challenge"), "challenge")
        return Handshake(challenge, headers={"x-content-type-options": "nosniff"})

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        digest = hashlib.sha256(body).hexdigest()
        kind = (
            "list_folder" if "list_folder" in payload else optional_text(next(iter(payload), None))
        )
        return Identity(event_id=digest, event_type=kind, occurred_at=None, payload=payload)

    def authenticate(
        self, headers: Headers, body: bytes, *, now: float, query: Query | None = None
    ) -> Identity:
        """Each delivery its own event: the digest and the arrival millisecond (see above)."""
        identity = super().authenticate(headers, body, now=now, query=query)
        # A clock outside any real one (a test's, a broken one) still gives a bounded key.
        usable = math.isfinite(now) and 0 <= now < 10**11
        key = f"{identity.event_id}:{int(now * 1000) if usable else 0}"
        return replace(identity, event_id=key, occurred_at=parse_time(now))


PROVIDER = declare(
    Dropbox,
    example=lambda keys: Dropbox(secret="dropbox-app-secret"),
    event=lambda tag: {"list_folder": {"accounts": [f"dbid:{tag}"]}, "delta": {"users": [12]}},
    new_each_delivery=True,
)
