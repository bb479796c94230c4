"""Square: `x-square-hmacsha256-signature` = base64 HMAC-SHA256 of `notification_url + body`.

The notification URL is part of what Square signs, so it is configured on the source exactly
as it stands in the subscription (scheme, host, path, query, trailing slash): the request's own
URL is not used, since proxies and mounts rewrite it. The key is the body's `event_id`.
Square signs no timestamp. The legacy `x-square-signature` (HMAC-SHA1) is not read.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from hookinbox._errors import ConfigurationError
from hookinbox.sources._base import SecretSource
from hookinbox.sources._http import api_base_url, api_credential
from hookinbox.sources._identity import Identity, fields_identity
from hookinbox.sources._provider import b64_mac, json_headers, provider, secret_key
from hookinbox.sources._secrets import configured_url
from hookinbox.sources._signatures import Headers, decode_digests, require_match

if TYPE_CHECKING:
    from hookinbox.sources._provider_api import Listing

API_BASE = "https://connect.squareup.com"


class Square(SecretSource):
    default_name = "square"
    # Retries for up to 24 hours.
    redelivery_window = timedelta(days=1)
    stored_headers = ("x-square-hmacsha256-signature",)
    signature_headers = stored_headers

    def __init__(
        self,
        *,
        secret: str | Sequence[str],
        notification_url: str,
        name: str | None = None,
        access_token: str | None = None,
        api_base: str = API_BASE,
    ) -> None:
        """`access_token` lets `hookinbox reconcile` search the events Square sent
        (docs/reconcile.md); `api_base` is where its API answers."""
        super().__init__(secret=secret, name=name)
        self.notification_url = configured_url(notification_url, "notification_url")
        self._url = self.notification_url.encode()
        self._access_token = api_credential(access_token, "Square's access_token")
        self.api_base = api_base_url(api_base, "Square's api_base")

    def listing(self) -> Listing:
        if self._access_token is None:
            raise ConfigurationError(
                f"source {self.name!r} has no access_token: Square(secret=..., "
                "notification_url=..., access_token=...) searches events from Square's API"
            )
        from hookinbox._extras import require

        require("reconcile from Square's API", "http")
        from hookinbox.sources._square_api import SquareEvents

        return SquareEvents(access_token=self._access_token, api_base=self.api_base)

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        candidates = decode_digests(
            headers,
            "x-square-hmacsha256-signature",
            what="x-square-hmacsha256-signature",
            encoding="base64",
        )
        require_match(self._keys, candidates, self._url + body)

    def identify(self, headers: Headers, body: bytes) -> Identity:
        return fields_identity(
            body, id_field="event_id", type_field="type", time_field="created_at", what="event_id"
        )


def sign(source: Square, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    url = fields.pop("notification_url", source.notification_url)
    signature = b64_mac(secret_key(source, fields), url.encode() + body)
    return {
        **json_headers(fields),
        "square-version": fields.pop("square_version", "2024-10-17"),
        "x-square-hmacsha256-signature": signature,
    }


PROVIDER = provider(
    Square,
    sign=sign,
    example=lambda keys: Square(
        secret="sq-example", notification_url="https://example.com/webhooks/square"
    ),
    event=lambda tag: {"event_id": tag, "type": "payment.updated"},
    signature_header="x-square-hmacsha256-signature",
)
