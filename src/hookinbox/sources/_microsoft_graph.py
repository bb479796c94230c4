"""Microsoft Graph change notifications: a `validationToken` echoed, then `clientState` checked.

Graph signs nothing in a basic notification. A subscription is created with a `clientState`
(a secret of yours, up to 128 characters), and every notification of it carries that value:
so each notification of a delivery must carry one of the configured values, compared in
constant time (as digests, `matches_secret`), or the whole delivery is refused (401). One URL
may receive the notifications of several subscriptions at once: configure each one's
`clientState` (a list).

The handshake: when a subscription is created or renewed, Graph POSTs to the URL with
`?validationToken=<token>` (and no notification), and wants the token back, URL-decoded, as
`text/plain` with 200 within 10 seconds. It proves nothing (nothing is signed) and changes
nothing: it is answered before anything else (`check_query`), the echo is bounded (512
characters of printable ASCII, nothing that starts markup or quotes), and nothing is stored.

Deliveries are batches: `value[]`, each a change notification (`changeType`) or a lifecycle
notification (`lifecycleEvent`: `reauthorizationRequired`, `subscriptionRemoved`, `missed`).
Each is stored under `<subscriptionId>:<id>` where Graph gives the notification an `id`, else
`<subscriptionId>:<sha256 of the notification>` (without `subscriptionExpirationDateTime`,
which a renewal between two attempts changes, and without `clientState`). The type is the
`changeType` or the `lifecycleEvent`.

The `validationTokens` (JWTs) of rich notifications, whose resource data is encrypted with
your certificate, are not checked here (such a delivery is checked by its `clientState` as any
other): `MicrosoftGraphRich` (`_microsoft_graph_rich.py`) checks them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, ClassVar

from hookinbox._errors import BadSignature, Handshake, PayloadError
from hookinbox.sources._base import BatchSource
from hookinbox.sources._handshakes import Query, challenge_text, query_value
from hookinbox.sources._identity import Identity, canonical_json, event_key, optional_text
from hookinbox.sources._json_slices import member_items
from hookinbox.sources._provider import json_headers, provider
from hookinbox.sources._secrets import utf8_keys
from hookinbox.sources._signatures import Headers, matches_secret

TOKEN_CHARACTERS = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 -._~+/=:,;()!*@#$%?[]|^"
)
"""What an echoed validation token may hold: Graph's tokens are printable text (a sentence,
with spaces, colons and a request id); nothing that could start markup (`<`, `&`) or close a
quoted string, and no line break."""

CHANGE = "changeType"
LIFECYCLE = "lifecycleEvent"
RENEWED = "subscriptionExpirationDateTime"


class MicrosoftGraph(BatchSource):
    default_name = "microsoft-graph"
    # Graph retries a failed notification for up to 4 hours (not confirmed); a day's margin.
    redelivery_window = timedelta(days=1)
    reads_query: ClassVar[bool] = True

    def __init__(self, *, client_state: str | Sequence[str], name: str | None = None) -> None:
        super().__init__(name=name)
        self._states = utf8_keys(client_state)

    def check_query(self, query: Query, headers: Headers, body: bytes) -> Handshake | None:
        token = query_value(query, "validationToken")
        if token is None:
            return None
        echoed = challenge_text(token, "validationToken", allowed=TOKEN_CHARACTERS)
        return Handshake(echoed, content_type="text/plain; charset=utf-8")

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        try:
            items = member_items(body, "value")
        except PayloadError as exc:  # nothing to check a clientState in: not Graph's
            raise BadSignature(f"no notifications to authenticate ({exc.message})") from exc
        if not items:
            raise BadSignature("no notifications to authenticate")
        for item in items:
            state = item.value.get("clientState") if isinstance(item.value, dict) else None
            if not isinstance(state, str) or not matches_secret(state, self._states):
                raise BadSignature("a notification's clientState is not a configured one")

    def identify_batch(self, headers: Headers, body: bytes) -> list[Identity]:
        return self.identify_items(member_items(body, "value"), _notification)


def _notification(item: Any) -> Identity:
    if not isinstance(item, dict):
        raise PayloadError("a notification of the batch is not a JSON object")
    subscription = event_key(item.get("subscriptionId"), "subscriptionId")
    # What a retry repeats: all but the subscription's expiry (a renewal changes it between
    # two attempts) and the secret.
    kept = {name: value for name, value in item.items() if name not in (RENEWED, "clientState")}
    ident = item.get("id")
    if not isinstance(ident, str) or not ident:
        ident = hashlib.sha256(canonical_json(kept)).hexdigest()
    return Identity(
        event_id=event_key(f"{subscription}:{ident}"),
        event_type=optional_text(item.get(CHANGE) or item.get(LIFECYCLE)),
        occurred_at=None,
        payload=item,
        fingerprint=canonical_json(kept),
    )


def sign(
    source: MicrosoftGraph, body: bytes, t: int, fields: dict[str, Any]
) -> tuple[dict[str, str], bytes]:
    # Graph's "signature": each notification carries the subscription's clientState as it is.
    state = fields.pop("secret", None) or source._states[0].decode()
    document = json.loads(body)
    for item in document.get("value", []):
        item["clientState"] = state
    return json_headers(fields), json.dumps(document).encode()


PROVIDER = provider(
    MicrosoftGraph,
    sign=sign,
    example=lambda keys: MicrosoftGraph(client_state="graph-example-client-state"),
    event=lambda tag: {
        "value": [
            {
                "id": f"lsgTZMr9KwAAA{tag}",
                "subscriptionId": "7f105c7d-2dc5-4530-97cd-4e7ae6534c07",
                RENEWED: "2026-12-01T12:00:00.000Z",
                CHANGE: "created",
                "resource": f"Users/u1/Messages/{tag}",
                "tenantId": "84bd8158-6d4d-4958-8b9f-9d6445542f95",
                "resourceData": {"@odata.type": "#Microsoft.Graph.Message", "id": tag},
            }
        ]
    },
    signature_header=None,
    signed_in_body=True,
    batch_key=lambda body: f"7f105c7d-2dc5-4530-97cd-4e7ae6534c07:{body['value'][0]['id']}",
)
