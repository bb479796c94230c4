"""A JSON Web Key Set a provider publishes at one URL: Google's for Pub/Sub's tokens,
Microsoft's for Graph's validation tokens.

Its RSA keys by `kid`, fetched from the provider's allow-listed URL and cached by `_keys.py`
(a key id the cache lacks is fetched anew, at most once a minute), or given by the operator
instead (`pinned_keys`), for a network that cannot reach the provider.
"""

from __future__ import annotations

import json
import ssl
from typing import TYPE_CHECKING, Any

from hookinbox._errors import BadSignature, ConfigurationError
from hookinbox.sources import _jwt
from hookinbox.sources._keys import AllowList, Fetcher, KeyCache, Parsed

if TYPE_CHECKING:
    import httpx


def rsa_keys(document: Any, rules: _jwt.Rules) -> dict[str, Any]:
    """The RSA keys of a key set document, by `kid`, for the rules' algorithms."""
    return _jwt.key_set(document, rules, usable=lambda jwk: jwk.get("kty") == "RSA")


def pinned_keys(keys: str | dict[str, Any], rules: _jwt.Rules) -> dict[str, Any]:
    """A JWK Set given as a dict or its JSON, or `ConfigurationError`."""
    try:
        document = json.loads(keys) if isinstance(keys, str) else keys
        found = rsa_keys(document, rules)
    except (ValueError, BadSignature) as exc:
        raise ConfigurationError("keys= is a JWK Set or a PEM RSA public key") from exc
    if not found:
        raise ConfigurationError("keys= holds no RS256 key")
    return found


class PublishedKeySet:
    """One provider's key set at `url`, fetched within `allow` and cached; or the `pinned`
    keys, when the operator gave them (nothing is fetched then)."""

    def __init__(
        self,
        allow: AllowList,
        url: str,
        rules: _jwt.Rules,
        *,
        pinned: dict[str, Any] | None,
        feature: str,
        default_max_age: float,
        timeout: float,
        ssl_context: ssl.SSLContext | None,
        transport: httpx.BaseTransport | None,
    ) -> None:
        self.url = url
        self.rules = rules
        self.what = allow.what
        self._pinned = pinned
        self._cache: KeyCache[dict[str, Any]] | None = None
        if pinned is None:
            fetcher = Fetcher(
                feature=feature, timeout=timeout, ssl_context=ssl_context, transport=transport
            )
            self._cache = KeyCache(
                allow, self._read, fetcher, default_max_age=default_max_age, cache_size=1
            )

    def key(self, kid: str, *, now: float) -> Any:
        """The key `kid` names (a pinned PEM key, `*`, stands for any), or None. A `kid` the
        cache lacks is fetched anew (a rotation), at most once a minute."""
        if self._cache is None:
            keys = self._pinned or {}
        else:
            keys = self._cache.get(self.url, now=now, want=lambda found: kid in found)
        return keys.get(kid, keys.get("*"))

    def _read(self, body: bytes) -> Parsed[dict[str, Any]]:
        what = self.what
        try:
            document = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise BadSignature(f"{what} is not JSON") from exc
        keys = rsa_keys(document, self.rules)
        if not keys:
            raise BadSignature(f"{what} holds no RS256 key")
        return Parsed(keys)
