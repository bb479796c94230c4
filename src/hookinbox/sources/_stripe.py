"""Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...]`, HMAC-SHA256 over `{t}.{body}`.

The `whsec_...` secret is the HMAC key as it stands (UTF-8), not base64-decoded. Any `v1`
entry may match (Stripe sends one per active secret while a secret is rolled). The key is the
body's `id` (`evt_...`), stable across retries; `t` and the signature change on every attempt.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from hookinbox._errors import ConfigurationError
from hookinbox.sources._base import SignatureListSource
from hookinbox.sources._http import api_base_url, api_credential
from hookinbox.sources._identity import Identity, fields_identity
from hookinbox.sources._provider import HOUR, MINUTE, Simulation, hex_mac, provider, secret_key
from hookinbox.sources._signatures import DEFAULT_TOLERANCE, Headers

if TYPE_CHECKING:
    from hookinbox.sources._provider_api import Listing

API_BASE = "https://api.stripe.com"


class Stripe(SignatureListSource):
    default_name = "stripe"
    # Automatic retries for 3 days, manual resend from the dashboard within 30 (seed 000).
    redelivery_window = timedelta(days=30)
    stored_headers = ("stripe-signature",)
    signature_header = "stripe-signature"
    signature_headers = (signature_header,)
    header_label = "Stripe-Signature"
    separator = ","
    timestamp_name = "t"
    signature_name = "v1"
    joiner = b"."

    def __init__(
        self,
        *,
        secret: str | Sequence[str],
        name: str | None = None,
        tolerance: float | None = DEFAULT_TOLERANCE,
        api_key: str | None = None,
        api_base: str = API_BASE,
    ) -> None:
        """`api_key` (a secret or restricted key that may read events) lets `hookinbox
        reconcile` list the events Stripe sent (docs/reconcile.md); `api_base` is where its
        API answers (a test's loopback imitation)."""
        super().__init__(secret=secret, name=name, tolerance=tolerance)
        self._api_key = api_credential(api_key, "Stripe's api_key")
        self.api_base = api_base_url(api_base, "Stripe's api_base")

    def listing(self) -> Listing:
        if self._api_key is None:
            raise ConfigurationError(
                f"source {self.name!r} has no api_key: Stripe(secret=..., api_key=...) lists "
                "events from Stripe's API"
            )
        from hookinbox._extras import require

        require("reconcile from Stripe's API", "http")
        from hookinbox.sources._stripe_api import StripeEvents

        return StripeEvents(api_key=self._api_key, api_base=self.api_base)

    def identify(self, headers: Headers, body: bytes) -> Identity:
        return fields_identity(body, id_field="id", type_field="type", time_field="created")


def sign(source: Stripe, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    digest = hex_mac(secret_key(source, fields), f"{t}.".encode() + body)
    return {
        "Content-Type": "application/json; charset=utf-8",
        "User-Agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
        "Stripe-Signature": f"t={t},v1={digest}",
    }


PROVIDER = provider(
    Stripe,
    sign=sign,
    example=lambda keys: Stripe(secret="whsec_example"),
    event=lambda tag: {"id": f"evt_{tag}", "type": "invoice.paid", "created": 1_700_000_000},
    signature_header="Stripe-Signature",
    # Seed 000: 5 s, 5 min, 30 min, 2 h, 5 h, "..." for 3 days; after 5 h we continue every
    # 10 h [U], which spends 11 retries inside the 72 h. Ack timeout: seed 000 names a cold
    # start "over 10 s" as a cause of retries [U].
    simulation=Simulation(
        retry_delays=(5, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR, *(10 * HOUR,) * 6),
        ack_timeout=10.0,
        signs_timestamp=True,
        signature_headers=frozenset({"stripe-signature"}),
    ),
)
