"""What a source is configured with: its secrets, and the URL a provider signs.

A secret is one string, or several while one is rotated (the old and the new one both
verify). A blank one is refused when the source is built, since an HMAC key anyone can guess
verifies anything. Most providers key their HMAC with the secret's UTF-8 bytes (`utf8_key`);
a provider that encodes its secret otherwise (Standard Webhooks' base64, Adyen's hex) has its
source override `SecretSource.decode_key`. Every mistake here is a `ConfigurationError` at
start-up, never a refused delivery.
"""

from __future__ import annotations

from collections.abc import Sequence

from hookinbox._errors import ConfigurationError


def secrets_tuple(secret: str | Sequence[str]) -> tuple[str, ...]:
    """Accept one secret or several (rotation: the old and the new one both verify)."""
    if isinstance(secret, str):
        secrets: tuple[str, ...] = (secret,)
    elif isinstance(secret, Sequence) and not isinstance(secret, bytes):
        secrets = tuple(secret)
    else:  # None from an unset variable, bytes, a number: say so, not "not iterable"
        got = "None (an unset environment variable?)" if secret is None else type(secret).__name__
        raise ConfigurationError(
            f"a secret must be a string, or a list of strings to rotate; got {got}"
        )
    # A blank secret (an unset variable padded with a space or a newline) would be an HMAC key
    # anyone can guess: refused like an empty one.
    if not secrets or any(not isinstance(s, str) or not s.strip() for s in secrets):
        raise ConfigurationError("a source needs at least one non-empty secret, none blank")
    return secrets


def utf8_key(secret: str) -> bytes:
    """The HMAC key of a secret used as it stands (UTF-8), not decoded: most providers' way."""
    try:
        return secret.encode()
    except UnicodeEncodeError as exc:
        raise ConfigurationError("a secret must be encodable as UTF-8") from exc


def utf8_keys(secret: str | Sequence[str]) -> list[bytes]:
    return [utf8_key(s) for s in secrets_tuple(secret)]


def configured_url(url: str, what: str) -> str:
    """A webhook URL a provider signs (Square, Twilio), checked when the source is built."""
    if not isinstance(url, str) or not url.startswith(("https://", "http://")):
        raise ConfigurationError(f"{what} must be the full http(s) URL the provider calls")
    try:
        url.encode()
    except UnicodeEncodeError as exc:
        raise ConfigurationError(f"{what} must be encodable as UTF-8") from exc
    if not url.isprintable() or any(c.isspace() for c in url):
        raise ConfigurationError(f"{what} must not contain white space or control characters")
    return url
