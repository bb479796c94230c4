"""What reconciling from a provider's API shares: the listing seam, its errors, the limits a
run keeps, and requests that honour the provider's rate limits.

A source that can list (or resend) the events it sent answers `Source.listing()` with a
`Listing`; `hookinbox reconcile` stores what it lists through the ingest gateway. The calls
carry an API key, so they go to an HTTPS base (HTTP only on loopback, `_http.api_base_url`),
and no error line ever holds the key: an answer's body is not echoed, only the provider's own
error message, and not even that for a refused key (Stripe's names the key's last characters).

A page is fetched at most `MAX_TRIES` times: a 429 waits for its `Retry-After` (at most
`MAX_RETRY_AFTER` seconds), a 5xx or a network failure backs off (1, 2, 4, 8 s); 401 and 403
fail at once (`APIRefused`): retrying a refused key only spends the rate limit.

An API that misbehaves cannot keep a run going (issue 45): each run keeps `Limits` through a
`Budget` (a page cap, a deadline per request and one for the whole run), each listing's
`Pager` refuses a cursor it has followed already, and an answer is streamed and cut at
`max_answer_bytes`, so a run's memory stays bounded whatever the answer's size.
"""

from __future__ import annotations

import functools
import json
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import urlsplit

from hookinbox._errors import ConfigurationError, HookinboxError

if TYPE_CHECKING:
    import httpx

MAX_TRIES = 5
MAX_RETRY_AFTER = 60.0
BACKOFF = 1.0
"""The first pause after a 5xx or a network failure; doubled before each further try."""
MAX_ANSWER_BYTES = 16 * 1024 * 1024
"""A page of 100 Stripe events is well under a megabyte; a larger answer is not a page."""
MAX_ERROR_BYTES = 64 * 1024
"""What is read of an error's answer for its message; the rest is never read."""
PAGE_TIMEOUT = 60.0
"""Seconds one request may take, from sending it to the last byte of its answer."""
RUN_TIMEOUT = 30 * 60.0
"""Seconds one run of one source may take, its pages, retries and stores included."""
MAX_PAGES = 10_000
"""Pages one run may list: a million Stripe events, far past a few days of most accounts."""
READ_TIMEOUT = 30.0
"""httpx's timeouts (connect, each read, each write), within what the deadline leaves."""
STOP_CHECK = 0.1
"""How often a request waiting for its answer checks whether the run was stopped."""

# Why a listed item is skipped rather than stored or resent (`Listed.skip`); each counted.
NOT_EVENT = "not_event"
"""Not an event as the API lists them: another object (a Stripe `charge`), no id, no time."""
OTHER_ACCOUNT = "other_account"
"""Another account's event (a Stripe Connect account's, on a listing of the platform's)."""
BAD_ID = "bad_id"
"""An id that is not what the provider's ids are (GitHub: a positive integer): never sent."""

T = TypeVar("T")


class ProviderAPIError(HookinboxError):
    """A provider's API could not be listed: the run stops; what earlier pages stored stays."""


class APIRefused(ProviderAPIError):
    """The provider refused the credentials (401, 403): nothing is retried."""


@dataclass(frozen=True, slots=True)
class Limits:
    """What one reconcile run of one source may spend (docs/reconcile.md, "Limits")."""

    page_timeout: float = PAGE_TIMEOUT
    run_timeout: float = RUN_TIMEOUT
    max_pages: int = MAX_PAGES
    max_answer_bytes: int = MAX_ANSWER_BYTES

    def __post_init__(self) -> None:
        for name in ("page_timeout", "run_timeout"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
                raise ConfigurationError(f"reconcile's {name} must be a positive number of "
                                         f"seconds, not {value!r}")  # fmt: skip
        for name in ("max_pages", "max_answer_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigurationError(f"reconcile's {name} must be a positive integer, "
                                         f"not {value!r}")  # fmt: skip


class Budget:
    """One run's clock and limits: every request, pause and page is checked against it, and
    `stop` (the worker's shutdown) ends the run at the next check or while a request waits."""

    def __init__(
        self, limits: Limits | None = None, *, stop: threading.Event | None = None
    ) -> None:
        self.limits = limits or Limits()
        self.stop = stop or threading.Event()
        self.ends = time.monotonic() + self.limits.run_timeout

    def left(self) -> float:
        return self.ends - time.monotonic()

    def check(self, what: str) -> None:
        """Raise if the run was stopped or is past its deadline."""
        if self.stop.is_set():
            raise ProviderAPIError(f"{what}: the run was stopped (the worker is stopping)")
        if self.left() <= 0:
            raise ProviderAPIError(self.run_late(what))

    def run_late(self, what: str) -> str:
        return f"{what}: the run took longer than {self.limits.run_timeout:g} s (its deadline)"

    def request_deadline(self) -> float:
        """When a request sent now must have its whole answer: its own deadline, or the
        run's if that comes first."""
        return min(time.monotonic() + self.limits.page_timeout, self.ends)

    def pager(self, what: str) -> Pager:
        return Pager(self, what)


class Pager:
    """One listing's pages: at most `max_pages`, each next one named by a cursor (an id, a
    token, a URL) never followed before in this run, so a cursor that does not move stops
    the listing at its second page instead of listing it forever."""

    def __init__(self, budget: Budget, what: str) -> None:
        self.budget = budget
        self.what = what
        self.count = 0
        self._followed: set[str] = set()

    def next_page(self, cursor: str | None = None) -> None:
        """Before each page's request; `cursor` names it (None for the first page)."""
        if cursor is not None:
            if cursor in self._followed:
                raise ProviderAPIError(
                    f"{self.what} named a page it had listed already as the next one (its "
                    f"cursor did not move)"
                )
            self._followed.add(cursor)
        if self.count >= self.budget.limits.max_pages:
            raise ProviderAPIError(
                f"{self.what} had more than {_pages(self.budget.limits.max_pages)} to list "
                "(the page cap)"
            )
        self.budget.check(self.what)
        self.count += 1

    def seen(self, cursor: str) -> None:
        """`cursor` names a page listed already (the first page's URL, on GitHub)."""
        self._followed.add(cursor)


def _pages(count: int) -> str:
    return f"{count} page" if count == 1 else f"{count} pages"


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
    at: datetime | None = None
    """When the provider says it happened (created, delivered): the run skips it outside the
    window it asked for."""
    skip: str | None = None
    """Why it is neither stored nor resent (`NOT_EVENT`, `OTHER_ACCOUNT`, `BAD_ID`); None
    for an event to act on."""


class Listing(Protocol):
    """What a source that can reconcile gives `hookinbox reconcile`."""

    window: timedelta
    """How far back the provider's API lists events (Stripe: 30 days)."""
    resends: bool
    """False: what is listed is stored (Stripe's API gives the event itself). True: nothing
    listed is stored; the provider is asked to deliver again (`resend`) what failed, and the
    redelivery arrives signed and is verified as usual (GitHub)."""

    def pages(self, since: datetime, budget: Budget) -> Iterator[list[Listed]]:
        """The events created at or after `since`, a page at a time (each page a unit),
        within `budget`."""
        ...

    def resend(self, listed: Listed, budget: Budget) -> None:
        """Ask the provider to deliver `listed` again (only where `resends`)."""
        ...


Sleep = Callable[[float], None]


@dataclass(frozen=True, slots=True)
class Answer:
    """A 2xx answer, read whole (at most the limit)."""

    status: int
    body: bytes
    links: Mapping[str, Mapping[str, str]]
    """The `Link` header's entries by `rel` (GitHub names its next page there)."""


def get_json(
    client: httpx.Client,
    url: str,
    *,
    params: Mapping[str, Any],
    what: str,
    budget: Budget,
    sleep: Sleep = time.sleep,
) -> dict[str, Any]:
    """GET `url` until it answers 200 with a JSON object, at most `MAX_TRIES` times."""
    answer = call(client, "GET", url, params=params, what=what, budget=budget, sleep=sleep)
    return json_object(answer, what)


def json_object(answer: Answer, what: str) -> dict[str, Any]:
    """An answer's JSON object; anything else stops the run."""
    value = _json(answer, what)
    if not isinstance(value, dict):
        raise ProviderAPIError(f"{what} answered JSON that is not an object")
    return value


def check_page_size(items: list[Any], page_size: int, what: str) -> None:
    """A page holds at most what was asked for; more is no page of this listing."""
    if len(items) > page_size:
        raise ProviderAPIError(f"{what} answered {len(items)} items to a page of {page_size}")


def json_list(answer: Answer, what: str) -> list[dict[str, Any]]:
    """A JSON array of objects (GitHub lists its deliveries so)."""
    value = _json(answer, what)
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise ProviderAPIError(f"{what} answered JSON that is not a list of objects")
    return value


def _json(answer: Answer, what: str) -> Any:
    try:
        return json.loads(answer.body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ProviderAPIError(f"{what} answered something that is not JSON") from exc


def call(
    client: httpx.Client,
    method: str,
    url: str,
    *,
    params: Mapping[str, Any] | None = None,
    body: Any = None,
    what: str,
    budget: Budget,
    sleep: Sleep = time.sleep,
) -> Answer:
    """`method` on `url` (with `body` as JSON, if any) until it answers 2xx, at most
    `MAX_TRIES` times, each try within its deadline; the answer."""
    import httpx

    failure = ""
    for attempt in range(MAX_TRIES):
        budget.check(what)
        deadline = budget.request_deadline()
        send = functools.partial(_send, client, method, url, params, body, deadline, budget, what)
        try:
            status, answer, message = _within(deadline, send, budget, what)
        except httpx.HTTPError as exc:
            failure = f"{what} cannot be reached ({type(exc).__name__})"
            pause = BACKOFF * 2**attempt
        else:
            if answer is not None:
                return answer
            if status in (401, 403):
                # Not the provider's message: Stripe's names the key's last characters.
                raise APIRefused(f"{what} refused the API key ({status})")
            if status == 429:
                failure = f"{what} answered 429 (rate limited)"
                pause = retry_after(message.retry_after, BACKOFF * 2**attempt)
            elif status >= 500:
                failure = f"{what} answered {status}"
                pause = BACKOFF * 2**attempt
            else:
                raise ProviderAPIError(f"{what} answered {status}: {message.text}")
        if attempt + 1 < MAX_TRIES:
            if pause >= budget.left():
                raise ProviderAPIError(
                    f"{failure}; waiting {pause:g} s for another try would pass the run's "
                    f"deadline ({budget.limits.run_timeout:g} s)"
                )
            sleep(pause)
    if failure.endswith("answered 429 (rate limited)"):
        failure = f"{what} kept answering 429 (rate limited)"
    raise ProviderAPIError(f"{failure}, {MAX_TRIES} tries")


@dataclass(frozen=True, slots=True)
class _Refusal:
    """What a non-2xx answer says: its message (on one line), its `Retry-After`."""

    text: str
    retry_after: str | None


def _send(
    client: httpx.Client,
    method: str,
    url: str,
    params: Mapping[str, Any] | None,
    body: Any,
    deadline: float,
    budget: Budget,
    what: str,
) -> tuple[int, Answer | None, _Refusal]:
    """One try: the answer streamed, read at most to its limit and until `deadline`."""
    import httpx

    limits = budget.limits
    timeout = httpx.Timeout(max(min(READ_TIMEOUT, deadline - time.monotonic()), 0.001))
    with client.stream(method, url, params=params, json=body, timeout=timeout) as response:
        status = response.status_code
        if 200 <= status < 300:
            content = _read(response, limits.max_answer_bytes, deadline, budget, what)
            links = {rel: link for rel, link in response.links.items() if rel is not None}
            return status, Answer(status, content, links), _Refusal("", None)
        content = _read(response, MAX_ERROR_BYTES, deadline, budget, what, cut=True)
        return status, None, _Refusal(_message(content), response.headers.get("retry-after"))


def _read(
    response: httpx.Response,
    limit: int,
    deadline: float,
    budget: Budget,
    what: str,
    *,
    cut: bool = False,
) -> bytes:
    """The answer's body, at most `limit` bytes of it: past that, "too large" (or, with
    `cut`, what came first); never past `deadline`."""
    declared = response.headers.get("content-length", "")
    if not cut and declared.isdigit() and int(declared) > limit:
        raise ProviderAPIError(_too_large(what, limit))
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        if time.monotonic() > deadline:
            raise ProviderAPIError(_late(what, budget))  # the caller gave up already
        size += len(chunk)
        if size > limit:
            if cut:
                chunks.append(chunk[: limit - size])
                break
            raise ProviderAPIError(_too_large(what, limit))
        chunks.append(chunk)
    return b"".join(chunks)


def _within(deadline: float, work: Callable[[], T], budget: Budget, what: str) -> T:
    """`work()`, given up at `deadline` or when the run is stopped.

    httpx's timeouts bound each read, not a whole answer: an answer that drips a byte at a
    time never times out. So the request runs in a thread of its own, and this thread waits
    for it no longer than the deadline; a request given up on ends by itself at its next read
    (`_read` checks the deadline), or at httpx's read timeout."""
    outcome: Future[T] = Future()

    def run() -> None:
        try:
            outcome.set_result(work())
        except BaseException as error:  # handed to the waiter, who may have gone
            outcome.set_exception(error)

    threading.Thread(target=run, name="hookinbox-reconcile-request", daemon=True).start()
    while True:
        left = deadline - time.monotonic()
        if budget.stop.is_set():
            raise ProviderAPIError(f"{what}: the run was stopped (the worker is stopping)")
        if left <= 0:
            break
        try:
            return outcome.result(timeout=min(left, STOP_CHECK))
        except TimeoutError:
            if outcome.done():
                raise  # the request's own error, not our wait's
    raise ProviderAPIError(_late(what, budget))


def _late(what: str, budget: Budget) -> str:
    """Which deadline passed: a request's deadline is the run's when that comes first, and
    either thread (the waiter or the reader) may be the one to see it."""
    if budget.left() <= 0:
        return budget.run_late(what)
    return f"{what}: a page took longer than {budget.limits.page_timeout:g} s (its deadline)"


def _too_large(what: str, limit: int) -> str:
    size = f"{limit // 2**20} MiB" if limit % 2**20 == 0 else f"{limit} bytes"
    return f"{what} answered more than {size}: too large for a page"


def same_origin(base: str, url: str) -> bool:
    """Whether `url` is on `base`'s origin (scheme, host and port), and names no user: the
    only place a page after the first may come from, since its request carries the key."""
    try:
        expected, found = urlsplit(base), urlsplit(url)
        expected_port = expected.port or _default_port(expected.scheme)
        found_port = found.port or _default_port(found.scheme)
    except ValueError:
        return False
    return (
        found.scheme == expected.scheme
        and found.scheme in ("https", "http")
        and found.username is None
        and found.password is None
        and bool(found.hostname)
        and found.hostname == expected.hostname
        and found_port == expected_port
    )


def _default_port(scheme: str) -> int | None:
    return {"https": 443, "http": 80}.get(scheme)


def retry_after(value: str | None, default: float) -> float:
    """`Retry-After` in seconds (a number; an HTTP date is read as the default), capped."""
    try:
        seconds = float(value) if value is not None else default
    except ValueError:
        seconds = default
    if seconds != seconds or seconds < 0:  # NaN or negative: not a usable answer
        seconds = default
    return min(seconds, MAX_RETRY_AFTER)


def _message(content: bytes) -> str:
    """The provider's own error message (`{"error": {"message": ...}}` on Stripe, `message`
    on GitHub, `errors[0].detail` on Square), on one line and short; never the request, which
    carries the key."""
    try:
        answer = json.loads(content)
    except (ValueError, UnicodeDecodeError, RecursionError):
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
