"""Asana: `X-Hook-Signature` (hex HMAC-SHA256 of the body), with a secret Asana hands over in
its first request, believed only inside a window the operator opens.

Establishing a webhook (`POST /webhooks` on Asana's API) makes Asana POST to the target with
`X-Hook-Secret` and no signature, while the API call waits; the target must answer 200 (or
204) echoing `X-Hook-Secret`, and every later delivery carries `X-Hook-Signature`, the hex
HMAC-SHA256 of the body under that secret. The secret is never shown anywhere else, so the
receiver has to learn it from that request: trust on first use.

So the first handshake is believed only while an operator has a window open for the source
(`hookinbox trust <source> --for 10m`, or `inbox.trust(<source>, for_=...)`): the secret is
kept in the database (every HTTP process verifies with it, after a restart too) and the
window closes. Outside a window a handshake is refused as a forged delivery is (401), and
nothing is kept. The secret is never logged, stored with an event or shown.

A source configured with `secret=` (one you have, or several) verifies with those too, and
needs no window. Where the secrets are kept is the receiver's: the source is handed the
store's `SecretBook` when the inbox starts (`attach_secrets`), and asks it only for a
handshake, or when a signature matches no secret it holds (at most once a second).

Deliveries are batches, `{"events": [...]}`. An Asana event has no id, and Asana sends the
same body again on a retry: each event is stored under
`<resource.gid>:<action>:<sha256 of the event>`. An empty `events` list is Asana's heartbeat,
answered 200 and not stored.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, ClassVar

from hookinbox._errors import (
    BadSignature,
    Handshake,
    MissingHeader,
    PayloadError,
    StoreUnavailable,
    VerificationUnavailable,
)
from hookinbox.sources._base import BatchSource
from hookinbox.sources._handshakes import HandshakeAnswer, Query, SecretBook
from hookinbox.sources._identity import Identity, canonical_json, event_key, optional_text
from hookinbox.sources._identity import parse_time as parse_event_time
from hookinbox.sources._json_slices import member_items
from hookinbox.sources._provider import hex_mac, json_headers, provider, secret_key
from hookinbox.sources._secrets import utf8_keys
from hookinbox.sources._signatures import (
    Headers,
    decode_digests,
    header_values,
    hmac_digest,
    matches_any,
)

SECRET = re.compile(r"[A-Za-z0-9]{16,255}")
"""An `X-Hook-Secret` hookinbox believes: Asana's are 64 hex digits; letters and digits only,
so it can be echoed in a header and kept as it is."""
LEARNED_ONLY: tuple[str, ...] = ()
"""`secret`'s default: no secret configured, each learned on first use."""
REFRESH_INTERVAL = 1.0
"""Seconds between two reads of the learned secrets after a signature matched none."""


class Asana(BatchSource):
    default_name = "asana"
    # Asana resends for up to 24 hours; a day's margin.
    redelivery_window = timedelta(days=2)
    signature_headers = ("x-hook-signature",)
    verifies_over_network: ClassVar[bool] = True  # may read the learned secrets
    learns_secrets: ClassVar[bool] = True

    def __init__(self, *, secret: str | Sequence[str] = LEARNED_ONLY, name: str | None = None):
        """`secret`: secrets you hold already; left out, every secret is learned on first use
        (a blank one, or None, is refused as for every source)."""
        super().__init__(name=name)
        self._keys = [] if secret is LEARNED_ONLY else utf8_keys(secret)
        self._book: SecretBook | None = None
        self._learned: list[bytes] = []
        self._read_at = float("-inf")
        self._lock = threading.Lock()

    def attach_secrets(self, book: SecretBook) -> None:
        """Keep and read learned secrets in `book` (the receiver's store)."""
        self._book = book

    def check_and_verify(
        self, headers: Headers, body: bytes, *, now: float, query: Query | None = None
    ) -> None:
        self._first_handshake(headers)
        super().check_and_verify(headers, body, now=now, query=query)

    def _first_handshake(self, headers: Headers) -> None:
        """Answer Asana's first request (`X-Hook-Secret`) if a window is open for it."""
        try:
            offered = header_values(headers, "x-hook-secret")
        except MissingHeader:
            return
        # Never the secret in a message: it would reach the logs.
        if len(offered) != 1 or not SECRET.fullmatch(offered[0]):
            raise BadSignature("X-Hook-Secret is not one secret of 16 to 255 letters and digits")
        try:
            believed = self._book is not None and self._book.learn(self.name, offered[0])
        except StoreUnavailable as exc:  # its message could quote the statement's values
            raise VerificationUnavailable("the database cannot keep the secret now") from exc
        if not believed:
            raise BadSignature(
                "a first handshake (X-Hook-Secret) outside a trust window: open one with "
                f"`hookinbox trust {self.name}` before creating the webhook"
            )
        with self._lock:
            self._read_at = float("-inf")  # read again at the first delivery
        raise Handshake("", headers={"x-hook-secret": offered[0]})

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        candidates = decode_digests(headers, "x-hook-signature", what="X-Hook-Signature")
        # The secrets held first (no database on a valid delivery's path); the learned ones
        # read again only when none matches: a webhook established in another process.
        if _matches([*self._keys, *self._learned], body, candidates):
            return
        if self._refresh() and _matches(self._learned, body, candidates):
            return
        raise BadSignature("X-Hook-Signature matches no secret of this source")

    def _refresh(self) -> bool:
        """Read the learned secrets again, at most once per `REFRESH_INTERVAL`."""
        if self._book is None:
            return False
        # Paced by this process's own time, not the inbox's clock (a test's frozen one).
        at = time.monotonic()
        with self._lock:
            if at - self._read_at < REFRESH_INTERVAL:
                return False
            self._read_at = at
        try:
            learned = [value.encode() for value in self._book.secrets(self.name)]
        except StoreUnavailable as exc:  # the provider retries: never a 401 for our outage
            raise VerificationUnavailable("the database cannot give the learned secrets") from exc
        with self._lock:
            self._learned = learned
        return True

    def handshake(self, headers: Headers, body: bytes) -> HandshakeAnswer | None:
        if not member_items(body, "events"):
            return Handshake("")  # the heartbeat: a signed, empty list
        return None

    def identify_batch(self, headers: Headers, body: bytes) -> list[Identity]:
        return self.identify_items(member_items(body, "events"), _event)


def _event(item: Any) -> Identity:
    if not isinstance(item, dict):
        raise PayloadError("an Asana event is not a JSON object")
    resource = item.get("resource")
    gid = resource.get("gid") if isinstance(resource, dict) else None
    action = optional_text(item.get("action"), 32)
    if not isinstance(gid, str) or action is None:
        raise PayloadError("an Asana event names no resource gid or action")
    digest = hashlib.sha256(canonical_json(item)).hexdigest()
    kind = resource.get("resource_type") if isinstance(resource, dict) else None
    return Identity(
        event_id=event_key(f"{gid}:{action}:{digest}"),
        event_type=optional_text(f"{kind}.{action}" if isinstance(kind, str) else action),
        occurred_at=parse_event_time(item.get("created_at")),
        payload=item,
    )


def sign(source: Asana, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    # Asana's recipe: the hex HMAC-SHA256 of the body, under the webhook's secret.
    key = secret_key(source, fields)
    return {**json_headers(fields), "X-Hook-Signature": hex_mac(key, body)}


def _matches(keys: Sequence[bytes], body: bytes, candidates: list[bytes]) -> bool:
    found = False
    for key in keys:  # every secret, without stopping at a match (constant time)
        found |= matches_any(hmac_digest(key, body), candidates)
    return found


PROVIDER = provider(
    Asana,
    sign=sign,
    example=lambda keys: Asana(secret="asana-example-hook-secret-0123456789"),
    event=lambda tag: {
        "events": [
            {
                "user": {"gid": "1200000000000001", "resource_type": "user"},
                "created_at": "2026-11-30T12:00:00.000Z",
                "action": "changed",
                "resource": {"gid": f"12{tag}", "resource_type": "task"},
                "parent": None,
                "change": {"field": "completed", "action": "changed"},
            }
        ]
    },
    signature_header="X-Hook-Signature",
    batch_key=lambda body: _event(body["events"][0]).event_id,
)
