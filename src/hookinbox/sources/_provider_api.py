"""What reconciling from a provider's API shares: the listing seam, its errors, and GETs that
honour the provider's rate limits.

A source that can list (or resend) the events it sent answers `Source.listing()` with a
`Listing`; `hookinbox reconcile` stores what it lists through the ingest gateway. The calls
carry an API key, so they go to an HTTPS base (HTTP only on loopback, `_http.api_base_url`),
and no error line ever holds the key: an answer's body is not echoed, only the provider's own
error message, and not even that for a refused key (Stripe's names the key's last characters).

A page is fetched at most `MAX_TRIES` times: a 429 waits for its `Retry-After` (at most
`MAX_RETRY_AFTER` seconds), a 5xx or a network failure backs off (1, 2, 4, 8 s); 401 and 403
fail at once (`APIRefused`): retrying a refused key only spends the rate limit.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from hookinbox._errors import HookinboxError
from hookinbox.sources._http import json_answer, json_value

if TYPE_CHECKING:
    import httpx

MAX_TRIES = 5
MAX_RETRY_AFTER = 60.0
BACKOFF = 1.0
"""The first pause after a 5xx or a network failure; doubled before each further try."""
MAX_ANSWER_BYTES = 16 * 1024 * 1024
"""A page of 100 Stripe events is well under a megabyte; a larger answer is not a page."""


class ProviderAPIError(HookinboxError):
    """A provider's API could not be listed: the run stops; what earlier pages stored stays."""


class APIRefused(ProviderAPIError):
    """The provider refused the credentials (401, 403): nothing is retried."""


@dataclass(frozen=True, slots=True)
class Listed:
    """One event a provider's API listed, as the source's `identify` reads a delivery of it."""

    body: bytes
    """Its JSON: what hookinbox stores (a listing that `resends` stores nothing)."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """The headers a delivery of it carries that name it (GitHub's delivery GUID, event)."""
    resend: str | None = None
    """For a listing that `resends`: the provider's id to ask a redelivery of, when its last
    delivery failed; None when it need not be sent again."""


class Listing(Protocol):
    """What a source that can reconcile gives `hookinbox reconcile`."""

    window: timedelta
    """How far back the provider's API lists events (Stripe: 30 days)."""
    resends: bool
    """False: what is listed is stored (Stripe's API gives the event itself). True: nothing
    listed is stored; the provider is asked to deliver again (`resend`) what failed, and the
    redelivery arrives signed and is verified as usual (GitHub)."""

    def pages(self, since: datetime) -> Iterator[list[Listed]]:
        """The events created at or after `since`, a page at a time (each page a unit)."""
        ...

    def resend(self, listed: Listed) -> None:
        """Ask the provider to deliver `listed` again (only where `resends`)."""
        ...


Sleep = Callable[[float], None]


def get_json(
    client: httpx.Client,
    url: str,
    *,
    params: Mapping[str, Any],
    what: str,
    sleep: Sleep = time.sleep,
) -> dict[str, Any]:
    """GET `url` until it answers 200 with a JSON object, at most `MAX_TRIES` times."""
    return json_object(call(client, "GET", url, params=params, what=what, sleep=sleep), what)


def json_object(response: httpx.Response, what: str) -> dict[str, Any]:
    """An answer's JSON object; anything else stops the run."""
    return json_answer(response, what, error=ProviderAPIError, limit=MAX_ANSWER_BYTES)


def call(
    client: httpx.Client,
    method: str,
    url: str,
    *,
    params: Mapping[str, Any] | None = None,
    body: Any = None,
    what: str,
    sleep: Sleep = time.sleep,
) -> httpx.Response:
    """`method` on `url` (with `body` as JSON, if any) until it answers 2xx, at most
    `MAX_TRIES` times; the answer."""
    import httpx

    failure = ""
    for attempt in range(MAX_TRIES):
        try:
            response = client.request(method, url, params=params, json=body)
        except httpx.HTTPError as exc:
            failure = f"{what} cannot be reached ({type(exc).__name__})"
            pause = BACKOFF * 2**attempt
        else:
            status = response.status_code
            if 200 <= status < 300:
                return response
            if status in (401, 403):
                # Not the provider's message: Stripe's names the key's last characters.
                raise APIRefused(f"{what} refused the API key ({status})")
            if status == 429:
                failure = f"{what} kept answering 429 (rate limited)"
                pause = retry_after(response.headers.get("retry-after"), BACKOFF * 2**attempt)
            elif status >= 500:
                failure = f"{what} answered {status}"
                pause = BACKOFF * 2**attempt
            else:
                raise ProviderAPIError(f"{what} answered {status}: {_message(response)}")
        if attempt + 1 < MAX_TRIES:
            sleep(pause)
    raise ProviderAPIError(f"{failure}, {MAX_TRIES} tries")


def json_list(response: httpx.Response, what: str) -> list[dict[str, Any]]:
    """A JSON array of objects (GitHub lists its deliveries so)."""
    answer = json_value(response, what, error=ProviderAPIError, limit=MAX_ANSWER_BYTES)
    if not isinstance(answer, list) or not all(isinstance(item, dict) for item in answer):
        raise ProviderAPIError(f"{what} answered JSON that is not a list of objects")
    return answer


def retry_after(value: str | None, default: float) -> float:
    """`Retry-After` in seconds (a number; an HTTP date is read as the default), capped."""
    try:
        seconds = float(value) if value is not None else default
    except ValueError:
        seconds = default
    if seconds != seconds or seconds < 0:  # NaN or negative: not a usable answer
        seconds = default
    return min(seconds, MAX_RETRY_AFTER)


def _message(response: httpx.Response) -> str:
    """The provider's own error message (`{"error": {"message": ...}}` on Stripe, `message`
    on GitHub, `errors[0].detail` on Square), on one line and short; never the request, which
    carries the key."""
    try:
        answer = json.loads(response.content)
    except (ValueError, UnicodeDecodeError):
        return "no error message"
    if not isinstance(answer, dict):
        return "no error message"
    error = answer.get("error")
    errors = answer.get("errors")  # Square: a list of {category, code, detail}
    if isinstance(error, dict):
        message = error.get("message")
    elif isinstance(errors, list) and errors and isinstance(errors[0], dict):
        message = errors[0].get("detail")
    else:
        message = answer.get("message")
    if not isinstance(message, str) or not message.strip():
        return "no error message"
    return " ".join(message.split())[:200]
