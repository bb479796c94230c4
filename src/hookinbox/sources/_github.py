"""GitHub: `X-Hub-Signature-256: sha256=<hex>`, HMAC-SHA256 of the body.

The key is `X-GitHub-Delivery`, which GitHub keeps when a delivery is redelivered. Every hook
that fires for one event shares that id; with `scope_by_hook=True` the key becomes
`<X-GitHub-Hook-ID>:<delivery>`, so several hooks pointing at one endpoint are several events.
The type is `X-GitHub-Event`; handlers read the payload's `action` for the sub-kind.
GitHub signs no timestamp.
Configure the hook with content type `application/json`; form-encoded bodies are refused (400).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from hookinbox.sources._base import (
    Headers,
    Identity,
    Source,
    check_prefixed_hex_hmac,
    event_key,
    optional_text,
    parse_json,
    require_header,
    utf8_keys,
)

PREFIX = "sha256="


class GitHub(Source):
    default_name = "github"
    redelivery_window = timedelta(days=3)  # manual redelivery within 3 days
    stored_headers = (
        "x-hub-signature-256",
        "x-github-delivery",
        "x-github-event",
        "x-github-hook-id",
        "x-github-hook-installation-target-id",
        "x-github-hook-installation-target-type",
    )
    signature_headers = ("x-hub-signature-256",)

    def __init__(
        self,
        *,
        secret: str | Sequence[str],
        name: str | None = None,
        scope_by_hook: bool = False,
    ) -> None:
        super().__init__(name=name)
        self._keys = utf8_keys(secret)
        self.scope_by_hook = scope_by_hook

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        header = require_header(headers, "x-hub-signature-256")
        check_prefixed_hex_hmac(header, body, self._keys, prefix=PREFIX, name="X-Hub-Signature-256")

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json(body)
        delivery = event_key(headers.get("x-github-delivery"), "X-GitHub-Delivery header")
        if self.scope_by_hook:
            hook = event_key(headers.get("x-github-hook-id"), "X-GitHub-Hook-ID header")
            delivery = event_key(f"{hook}:{delivery}")
        return Identity(
            event_id=delivery,
            event_type=optional_text(headers.get("x-github-event")),
            occurred_at=None,
            payload=payload,
        )
