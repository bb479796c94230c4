"""Microsoft Graph change notifications with resource data ("rich" notifications): the
`clientState` of `MicrosoftGraph`, and the `validationTokens` Graph adds, checked.

A subscription created with `includeResourceData` gets notifications whose resource data is
encrypted with your certificate (`encryptedContent`), and each delivery carries
`validationTokens`: JSON Web Tokens issued by the Microsoft identity platform, one for each
app and tenant whose notifications the delivery holds. Each token is checked by
`sources/_jwt.py`, as Microsoft's "validating the authenticity of notifications" asks:

- RS256 pinned, the key named by its `kid` from Microsoft's published key set
  (`https://login.microsoftonline.com/common/discovery/v2.0/keys`, fetched and cached by
  `sources/_keys.py`, that host and path only);
- `aud` one of the app ids you configure (`app_id`: the subscribing application);
- `azp` (`appid` in a v1 token) the Microsoft Graph change-notification publisher,
  `0bf30f3b-4a52-48df-9a82-234910c4a086`;
- `iss` the token's own tenant (`tid`) as `https://sts.windows.net/<tid>/` or
  `https://login.microsoftonline.com/<tid>/v2.0`, and that tenant the `tenantId` of a
  notification in the delivery;
- `exp` (and `nbf`, `iat`) on the source's clock, with `leeway`.

Every token of a delivery must pass (at most `MAX_TOKENS`), and a notification with
`encryptedContent` is accepted only when a token of its tenant passed: a delivery that drops
the tokens is refused, not taken for a basic one. A delivery without `validationTokens` and
without encrypted content (a basic or lifecycle notification) is checked by its
`clientState` alone, as `MicrosoftGraph` does. The resource data stays encrypted: decrypting
it is the handler's, with its private key.

The tokens prove that Graph sent notifications for your app and tenant; they do not cover
the body byte for byte (Graph signs no body), so `clientState` is still checked on every
notification.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from hookinbox._errors import BadSignature, PayloadError
from hookinbox.sources import _jwt
from hookinbox.sources._identity import parse_json_object
from hookinbox.sources._jwks import PublishedKeySet, pinned_keys
from hookinbox.sources._keys import AllowList
from hookinbox.sources._microsoft_graph import MicrosoftGraph
from hookinbox.sources._microsoft_graph import sign as client_state_sign
from hookinbox.sources._provider import provider
from hookinbox.sources._secrets import secrets_tuple
from hookinbox.sources._signatures import Headers

if TYPE_CHECKING:
    import httpx

MICROSOFT_KEYS_URL = "https://login.microsoftonline.com/common/discovery/v2.0/keys"
MICROSOFT_KEYS = AllowList(
    "Microsoft's key set",
    hosts=frozenset({"login.microsoftonline.com"}),
    path=re.compile(r"/common/discovery/v2\.0/keys"),
)
GRAPH_PUBLISHER = "0bf30f3b-4a52-48df-9a82-234910c4a086"
"""The app id of Microsoft Graph's change-notification publisher: every token's `azp`."""
MAX_TOKENS = 8
"""The most validation tokens a delivery may carry: each costs an RSA check, and Graph sends
one per app and tenant of the delivery's notifications."""
TENANT = re.compile(r"[0-9A-Za-z-]{1,64}")
KEY_SET_AGE = 24 * 3600.0  # Microsoft rotates its signing keys rarely; a day when not said


class MicrosoftGraphRich(MicrosoftGraph):
    default_name = "microsoft-graph-rich"
    verifies_over_network: ClassVar[bool] = True  # Microsoft's keys, when not cached

    def __init__(
        self,
        *,
        client_state: str | Sequence[str],
        app_id: str | Sequence[str],
        name: str | None = None,
        keys: str | dict[str, Any] | None = None,
        leeway: float = 300.0,
        timeout: float = 5.0,
        ssl_context: ssl.SSLContext | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """`app_id`: the application id (client id) that created the subscriptions, or
        several when one URL serves several apps. `keys`: a JWK Set (a dict or its JSON) used
        instead of fetching Microsoft's."""
        super().__init__(client_state=client_state, name=name)
        self.rules = _jwt.Rules(
            "a Graph validation token",
            frozenset({"RS256"}),
            audiences=frozenset(secrets_tuple(app_id)),
            require=("exp", "aud", "iss", "tid"),
            leeway=leeway,
        )
        _jwt.jwt_module("hookinbox.sources.MicrosoftGraphRich")
        self._keys = PublishedKeySet(
            MICROSOFT_KEYS,
            MICROSOFT_KEYS_URL,
            self.rules,
            pinned=pinned_keys(keys, self.rules) if keys is not None else None,
            feature="hookinbox.sources.MicrosoftGraphRich",
            default_max_age=KEY_SET_AGE,
            timeout=timeout,
            ssl_context=ssl_context,
            transport=transport,
        )

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        super().verify(headers, body, now=now)  # every notification's clientState first
        try:
            document = parse_json_object(body)
        except PayloadError as exc:  # the clientState check read it: not reached
            raise BadSignature(exc.message) from exc
        notifications = [n for n in document.get("value", []) if isinstance(n, dict)]
        tenants = {n.get("tenantId") for n in notifications}
        rich = {n.get("tenantId") for n in notifications if "encryptedContent" in n}
        tokens = document.get("validationTokens")
        if tokens is None:
            if rich:
                raise BadSignature("notifications with resource data but no validationTokens")
            return
        if (
            not isinstance(tokens, list)
            or not tokens
            or len(tokens) > MAX_TOKENS
            or not all(isinstance(token, str) for token in tokens)
        ):
            raise BadSignature(f"validationTokens is not a list of 1 to {MAX_TOKENS} tokens")
        proven = {self._verify_token(token, tenants, now) for token in dict.fromkeys(tokens)}
        if not rich <= proven:
            raise BadSignature("a notification's tenant has no valid validation token")

    def _verify_token(self, token: str, tenants: set[Any], now: float) -> str:
        """The tenant a valid token speaks for, or `BadSignature`."""
        kid = _jwt.header(token, self.rules).get("kid")
        if not isinstance(kid, str) or not kid:
            raise BadSignature("a Graph validation token names no key (kid)")
        claims = _jwt.verify(token, self._key(kid, now), self.rules, now=now)
        if claims.get("azp", claims.get("appid")) != GRAPH_PUBLISHER:
            raise BadSignature("a Graph validation token was not issued to Graph's publisher")
        tenant = claims.get("tid")
        if not isinstance(tenant, str) or not TENANT.fullmatch(tenant) or tenant not in tenants:
            raise BadSignature("a Graph validation token's tenant is not the notifications'")
        issuers = (
            f"https://sts.windows.net/{tenant}/",
            f"https://login.microsoftonline.com/{tenant}/v2.0",
        )
        if claims.get("iss") not in issuers:
            raise BadSignature("a Graph validation token's issuer is not its tenant's")
        return tenant

    def _key(self, kid: str, now: float) -> Any:
        key = self._keys.key(kid, now=now)
        if key is None:
            raise BadSignature("a Graph validation token's key is not one of Microsoft's")
        return key


EXAMPLE_APP = "9f2c3c5e-1b1e-4f4e-9a57-3c1ba5f0a2d1"

PROVIDER = provider(
    MicrosoftGraphRich,
    # A basic notification's clientState: the kit signs no Microsoft token (it holds no key
    # Microsoft publishes); the tokens are judged in test_source_microsoft_graph_rich.py.
    sign=client_state_sign,
    example=lambda keys: MicrosoftGraphRich(
        client_state="graph-example-client-state", app_id=EXAMPLE_APP
    ),
    event=lambda tag: {
        "value": [
            {
                "id": f"lsgTZMr9KwAAA{tag}",
                "subscriptionId": "7f105c7d-2dc5-4530-97cd-4e7ae6534c07",
                "subscriptionExpirationDateTime": "2026-12-01T12:00:00.000Z",
                "changeType": "created",
                "resource": f"Users/u1/Messages/{tag}",
                "tenantId": "84bd8158-6d4d-4958-8b9f-9d6445542f95",
            }
        ]
    },
    signature_header=None,
    signed_in_body=True,
    batch_key=lambda body: f"7f105c7d-2dc5-4530-97cd-4e7ae6534c07:{body['value'][0]['id']}",
)
