"""What the sources that call a provider's API share: where they may call, how answers read.

Those calls carry credentials (PayPal's client secret, Mollie's API key), so the base URL must
be HTTPS; plain HTTP is accepted only on a loopback address, where a test imitates the API.
"""

from __future__ import annotations

import ipaddress
import json
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from hookinbox._errors import ConfigurationError, HookinboxError, VerificationUnavailable

if TYPE_CHECKING:  # so that a source may check its API's URL without the extra installed
    import httpx

MAX_ANSWER_BYTES = 1024 * 1024


def api_base_url(url: str, what: str) -> str:
    """`url` without a trailing slash, if it is HTTPS (or HTTP on loopback)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        parts.port  # noqa: B018  (raises ValueError on a bad port)
    except ValueError as exc:
        raise ConfigurationError(f"{what} is not a URL: {url!r}") from exc
    if not host:
        raise ConfigurationError(f"{what} has no host: {url!r}")
    if parts.scheme == "http" and _is_loopback(host):
        return url.rstrip("/")
    if parts.scheme != "https":
        raise ConfigurationError(f"{what} must be https (http only on loopback): {url!r}")
    return url.rstrip("/")


def api_credential(value: str | None, what: str) -> str | None:
    """An API key or token as configured: None (no reconcile), or a non-empty string."""
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ConfigurationError(f"{what}, when given, must be a non-empty string")
    return value


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def json_answer(
    response: httpx.Response,
    what: str,
    *,
    error: type[HookinboxError] = VerificationUnavailable,
    limit: int = MAX_ANSWER_BYTES,
) -> dict[str, Any]:
    """A provider's JSON object answer; anything else means the provider is not well (`error`:
    a delivery waits for a retry, a reconcile stops)."""
    answer = json_value(response, what, error=error, limit=limit)
    if not isinstance(answer, dict):
        raise error(f"{what} answered JSON that is not an object")
    return answer


def json_value(
    response: httpx.Response, what: str, *, error: type[HookinboxError], limit: int
) -> Any:
    """A provider's answer as JSON, at most `limit` bytes of it."""
    try:
        if len(response.content) > limit:
            raise ValueError("answer too large")
        return json.loads(response.content)
    except (ValueError, UnicodeDecodeError) as exc:
        raise error(f"{what} answered something that is not JSON") from exc
