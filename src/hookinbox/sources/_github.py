"""GitHub: `X-Hub-Signature-256: sha256=<hex>`, HMAC-SHA256 of the body.

The key is `X-GitHub-Delivery`, which GitHub keeps when a delivery is redelivered. Every hook
that fires for one event shares that id; with `scope_by_hook=True` the key becomes
`<X-GitHub-Hook-ID>:<delivery>`, so several hooks pointing at one endpoint are several events.
The type is `X-GitHub-Event`; handlers read the payload's `action` for the sub-kind.
GitHub signs no timestamp.
Configure the hook with content type `application/json`; form-encoded bodies are refused (400).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from hookinbox._errors import ConfigurationError
from hookinbox.sources._base import Source
from hookinbox.sources._http import api_base_url, api_credential
from hookinbox.sources._identity import Identity, event_key, optional_text, parse_json
from hookinbox.sources._provider import (
    HOUR,
    Simulation,
    body_id,
    hex_mac,
    json_headers,
    provider,
    secret_key,
)
from hookinbox.sources._secrets import utf8_keys
from hookinbox.sources._signatures import Headers, check_prefixed_hex_hmac

if TYPE_CHECKING:
    from hookinbox.sources._provider_api import Listing

PREFIX = "sha256="
API_BASE = "https://api.github.com"
_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def hook_path(hook: str) -> str:
    """`OWNER/REPO/HOOK_ID` -> `repos/OWNER/REPO/hooks/HOOK_ID`; `ORG/HOOK_ID` ->
    `orgs/ORG/hooks/HOOK_ID`."""
    parts = hook.split("/") if isinstance(hook, str) else []
    if 2 <= len(parts) <= 3 and all(_NAME.fullmatch(p) for p in parts) and parts[-1].isdigit():
        owner = "/".join(parts[:-1])
        kind = "repos" if len(parts) == 3 else "orgs"
        return f"{kind}/{owner}/hooks/{parts[-1]}"
    raise ConfigurationError(
        f"GitHub's hook is OWNER/REPO/HOOK_ID or ORG/HOOK_ID (a number last), not {hook!r}"
    )


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
        api_token: str | None = None,
        hook: str | None = None,
        api_base: str = API_BASE,
    ) -> None:
        """`api_token` and `hook` (`OWNER/REPO/HOOK_ID` for a repository's hook, `ORG/HOOK_ID`
        for an organisation's) let `hookinbox reconcile` ask GitHub to redeliver what failed
        (docs/reconcile.md); `api_base` is where the REST API answers."""
        super().__init__(name=name)
        self._keys = utf8_keys(secret)
        self.scope_by_hook = scope_by_hook
        self._api_token = api_credential(api_token, "GitHub's api_token")
        self.hook_path = None if hook is None else hook_path(hook)
        self.api_base = api_base_url(api_base, "GitHub's api_base")

    def listing(self) -> Listing:
        if self._api_token is None or self.hook_path is None:
            raise ConfigurationError(
                f"source {self.name!r} needs api_token and hook: GitHub(secret=..., "
                "api_token=..., hook='OWNER/REPO/HOOK_ID') asks GitHub to redeliver"
            )
        from hookinbox._extras import require

        require("reconcile from GitHub's API", "http")
        from hookinbox.sources._github_api import HookDeliveries

        return HookDeliveries(
            api_token=self._api_token, api_base=self.api_base, hook_path=self.hook_path
        )

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        check_prefixed_hex_hmac(
            headers, body, self._keys, prefix=PREFIX, name="X-Hub-Signature-256"
        )

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


def sign(source: GitHub, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    key = secret_key(source, fields)
    return {
        **json_headers(fields),
        "User-Agent": "GitHub-Hookshot/7e5b2a1",
        "X-GitHub-Delivery": fields.pop("delivery", None) or body_id(source, body),
        "X-GitHub-Event": fields.pop("event", "push"),
        "X-GitHub-Hook-ID": str(fields.pop("hook_id", "471198234")),
        # The legacy SHA-1 header GitHub still sends next to the SHA-256 one.
        "X-Hub-Signature": "sha1=" + hex_mac(key, body, "sha1"),
        "X-Hub-Signature-256": "sha256=" + hex_mac(key, body),
    }


PROVIDER = provider(
    GitHub,
    sign=sign,
    example=lambda keys: GitHub(secret="gh-example"),
    event=lambda tag: {"id": f"evt_{tag}", "type": "order.paid", "created": 1_700_000_000},
    signature_header="X-Hub-Signature-256",
    # GitHub retries nothing by itself; failed deliveries are redelivered by hand (or by the
    # script GitHub documents) within 3 days. Modelled as one redelivery an hour later [U].
    simulation=Simulation(
        retry_delays=(HOUR,),
        ack_timeout=10.0,
        signs_timestamp=False,
        signature_headers=frozenset({"x-hub-signature-256", "x-hub-signature"}),
    ),
)
