"""JSON Web Tokens, checked the one way every provider's token is (Pub/Sub, Plaid, Netlify).

The signature is PyJWT's (the `jwt` extra; cryptography for public keys): a maintained
implementation of RFC 7515, rather than parsing written here. What a token may choose is
decided here, per provider, before PyJWT sees it:

- **Algorithms are pinned.** The provider's `Rules` name the algorithms its tokens use (RS256
  for Google, ES256 for Plaid, HS256 for Netlify); a token naming another is refused, `none`
  always. The key comes from the provider's configuration, never from the token, so a token
  signed with HS256 using a public key as the secret is refused twice: its algorithm is not
  pinned, and PyJWT refuses a public key as an HMAC secret.
- **Time is the source's clock**, not PyJWT's: `exp` in the past, `iat` in the future or older
  than the provider allows, `nbf` in the future are refused with `now` (the injected clock),
  give or take `leeway`.
- **`aud` and `iss`** must be one of the configured values, where the provider has them.
- **Size.** A token longer than `MAX_TOKEN` characters is refused before it is decoded.
- **Keys of the length RFC 7518 asks**: 32 bytes at least for HS256 (checked when a source is
  built), 2048 bits for RSA.

Every failure is `BadSignature` or `TimestampOutOfTolerance` (401).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from hookinbox._errors import BadSignature, TimestampOutOfTolerance
from hookinbox._extras import importing

MAX_TOKEN = 4096
"""Characters: a Google ID token is about 1 KiB, Plaid's and Netlify's less."""
NEVER = frozenset({"none", ""})


@dataclass(frozen=True, slots=True)
class Rules:
    """What one provider's tokens must be."""

    what: str
    """The token's name in refusals: "the Pub/Sub token"."""
    algorithms: frozenset[str]
    audiences: frozenset[str] | None = None
    """`aud` must be one of these (a list `aud` must hold one); None: not checked."""
    issuers: frozenset[str] | None = None
    require: tuple[str, ...] = ()
    """Claims that must be present."""
    max_age: float | None = None
    """Seconds `iat` may be old (Plaid: 300); None: `exp` decides."""
    leeway: float = 0.0
    """Seconds of clock skew allowed on `exp`, `nbf` and a future `iat`."""

    def __post_init__(self) -> None:
        if not self.algorithms or self.algorithms & NEVER:
            raise ValueError("pin at least one algorithm, never 'none'")


def jwt_module(feature: str) -> Any:
    with importing(feature, "jwt"):
        import jwt
    return jwt


def header(token: str, rules: Rules) -> dict[str, Any]:
    """The token's header, once its size and algorithm are acceptable (the key a source
    chooses may depend on its `kid`)."""
    jwt = jwt_module("hookinbox.sources")
    if not isinstance(token, str) or not token or len(token) > MAX_TOKEN:
        raise BadSignature(f"{rules.what} is missing or longer than {MAX_TOKEN} characters")
    if not token.isascii() or len(token.split(".")) != 3:
        raise BadSignature(f"{rules.what} is not a compact JWT")
    try:
        found: dict[str, Any] = jwt.get_unverified_header(token)
    except jwt.PyJWTError as exc:
        raise BadSignature(f"{rules.what} has no readable header") from exc
    algorithm = found.get("alg")
    if not isinstance(algorithm, str) or algorithm not in rules.algorithms:
        raise BadSignature(f"{rules.what} is signed with {str(algorithm)[:20]!r}, not a pinned one")
    return found


def verify(token: str, key: Any, rules: Rules, *, now: float) -> dict[str, Any]:
    """The claims of `token`, verified with `key` under `rules` at `now`."""
    jwt = jwt_module("hookinbox.sources")
    found = header(token, rules)
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=[found["alg"]],
            options={
                "verify_signature": True,
                # RFC 7518: an HMAC key as long as its hash, RSA keys of 2048 bits or more;
                # refused, not warned about on every delivery (sources check it when built).
                "enforce_minimum_key_length": True,
                "verify_exp": False,  # below, on the injected clock
                "verify_iat": False,
                "verify_nbf": False,
                "verify_aud": False,
                "verify_iss": False,
            },
        )
    except jwt.PyJWTError as exc:
        raise BadSignature(f"{rules.what} does not verify: {type(exc).__name__}") from exc
    for name in rules.require:
        if name not in claims:
            raise BadSignature(f"{rules.what} has no {name!r} claim")
    _check_times(claims, rules, now)
    _check_one_of(claims.get("aud"), rules.audiences, f"{rules.what}'s audience")
    _check_one_of(claims.get("iss"), rules.issuers, f"{rules.what}'s issuer")
    return claims


def _number(claims: dict[str, Any], name: str, rules: Rules) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise BadSignature(f"{rules.what}'s {name!r} is not a number")
    return float(value)


def _check_times(claims: dict[str, Any], rules: Rules, now: float) -> None:
    expires = _number(claims, "exp", rules)
    issued = _number(claims, "iat", rules)
    starts = _number(claims, "nbf", rules)
    if expires is not None and now > expires + rules.leeway:
        raise TimestampOutOfTolerance(f"{rules.what} expired {now - expires:.0f} s ago")
    if issued is not None and issued > now + rules.leeway:
        raise TimestampOutOfTolerance(f"{rules.what} is issued {issued - now:.0f} s in the future")
    if starts is not None and starts > now + rules.leeway:
        raise TimestampOutOfTolerance(f"{rules.what} is not valid for {starts - now:.0f} s")
    if rules.max_age is not None:
        if issued is None:
            raise BadSignature(f"{rules.what} has no 'iat' claim")
        if now - issued > rules.max_age:
            raise TimestampOutOfTolerance(
                f"{rules.what} is {now - issued:.0f} s old (at most {rules.max_age:.0f} s)"
            )


def _check_one_of(value: Any, allowed: Collection[str] | None, what: str) -> None:
    if allowed is None:
        return
    values = value if isinstance(value, list) else [value]
    if not any(isinstance(v, str) and v in allowed for v in values):
        raise BadSignature(f"{what} is not one this source accepts")


def key_set(
    document: dict[str, Any], rules: Rules, *, usable: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """The keys of a JSON Web Key Set, by `kid`, for the pinned algorithms; a key of another
    kind or use is left out."""
    jwt = jwt_module("hookinbox.sources")
    keys = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(keys, list):
        raise BadSignature(f"the key set for {rules.what} holds no keys")
    found: dict[str, Any] = {}
    for item in keys:
        if not isinstance(item, dict) or not isinstance(item.get("kid"), str) or not usable(item):
            continue
        if item.get("use", "sig") != "sig" or item.get("alg", next(iter(rules.algorithms))) not in (
            rules.algorithms
        ):
            continue
        try:
            found[item["kid"]] = jwt.PyJWK(item, algorithm=next(iter(rules.algorithms))).key
        except (jwt.PyJWTError, ValueError, TypeError, KeyError):
            continue
    return found
