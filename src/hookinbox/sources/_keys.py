"""Keys a provider publishes: fetched only from its own hosts, cached, refreshed off the path.

One mechanism for every provider that signs with a key it serves over HTTPS (AWS SNS's
certificates, Google's and Plaid's JSON Web Keys). Three promises, decided here once:

- **Only the provider's hosts.** A URL is checked before anything touches the network
  (`AllowList.check`): `https` only, a host of the provider's list or pattern (never an IP
  literal, never user information, never another port than 443), the provider's path. A
  redirect is not followed: it answers 503, as any other surprise of the provider's host does.
  Every fetch is bounded: a size cap, read as the body streams, and a deadline for the whole
  exchange, not only for each read.
- **A cached key is never fetched on a request's path.** A key is kept for the provider's
  `Cache-Control: max-age` (or the provider's default), clamped to at least a minute and at
  most a day. Past that it is still used for as long again while one background thread fetches
  it anew; only a key never fetched, or past both, is fetched while a delivery waits, and
  deliveries waiting for one key share one fetch (and its failure).
- **A failure is 503, never a guess.** An unreachable host, a timeout, a 5xx, a redirect:
  `VerificationUnavailable`, answered 503 with `Retry-After`, so the provider retries; the
  failure is remembered for a few seconds, so an outage costs one attempt, not one per
  delivery. What the provider's host says plainly does not exist (the provider's own list of
  statuses: SNS's 403 and 404 for a certificate path it has no file at) or what is not a key
  is `BadSignature` (401): no delivery is ever stored unverified.

httpx is imported when a cache is built (the `keys` extra); `check` needs only the standard
library, so the allow-lists are tested without it.
"""

from __future__ import annotations

import ipaddress
import re
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar
from urllib.parse import SplitResult, urlsplit

from hookinbox._errors import BadSignature, ConfigurationError, VerificationUnavailable
from hookinbox._extras import importing
from hookinbox._logging import logger

if TYPE_CHECKING:
    import httpx

log = logger("hookinbox.sources._keys")

T = TypeVar("T")

MAX_URL_LENGTH = 512
MAX_KEY_BYTES = 64 * 1024  # a certificate chain or a key set is a few kilobytes
DEFAULT_TIMEOUT = 5.0
MIN_AGE = 60.0
MAX_AGE = 24 * 3600.0
FAILURE_HOLD = 5.0
"""Seconds a failed fetch is answered from memory (503) before another is tried."""
NEW_KEY_INTERVAL = 10.0
"""Seconds between fetches of names never seen (a key id a delivery names): an unsigned
request choosing random ids must not make hookinbox call the provider for each."""
_NETLOC = re.compile(r"[A-Za-z0-9.-]+(:443)?")
_MAX_AGE = re.compile(r"(?:^|[,\s])max-age\s*=\s*\"?(\d{1,10})\"?", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class AllowList:
    """Where one provider's keys may come from."""

    what: str
    """The URL's name in refusals: "SigningCertURL"."""
    hosts: frozenset[str] = frozenset()
    """Exact host names, lower case."""
    host_pattern: re.Pattern[str] | None = None
    """Host names matched whole (SNS's `sns.<region>.amazonaws.com`)."""
    path: re.Pattern[str] | None = None
    """The path, matched whole; None allows any."""
    query: bool = False
    """Whether the URL may carry a query (SNS's `SubscribeURL` does; a key's URL does not)."""

    def check(self, url: str) -> SplitResult:
        """The URL's parts, or `BadSignature` before any network access."""
        refused = BadSignature(f"{self.what} is not on the provider's hosts")
        if (
            not isinstance(url, str)
            or len(url) > MAX_URL_LENGTH
            or not url.isascii()
            or not url.isprintable()
            or any(c.isspace() or c == "\\" for c in url)
        ):
            raise refused
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise refused from exc
        host = (parts.hostname or "").lower()
        if (
            parts.scheme != "https"
            or not _NETLOC.fullmatch(parts.netloc)  # no user information, no odd characters
            or port not in (None, 443)
            or _is_ip_literal(host)
            or not self._host_allowed(host)
            or (parts.query and not self.query)
            or parts.fragment
            or (self.path is not None and not self.path.fullmatch(parts.path))
        ):
            raise refused
        return parts

    def _host_allowed(self, host: str) -> bool:
        if host in self.hosts:
            return True
        return self.host_pattern is not None and self.host_pattern.fullmatch(host) is not None


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return host.replace(".", "").isdigit()  # 2130706433, 127.1: what resolvers accept
    return True


@dataclass(frozen=True, slots=True)
class Fetch:
    """One request for a key: what `KeyCache` sends for a name."""

    url: str
    method: str = "GET"
    json: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Parsed(Generic[T]):
    """A fetched document, read: the value to cache, and when it stops being usable at the
    latest (a certificate's end of validity; None: only the cache's age limits it)."""

    value: T
    expires: float | None = None


@dataclass(slots=True)
class _Entry(Generic[T]):
    value: T
    fetched: float
    fresh_until: float
    usable_until: float
    refreshing: bool = False
    retry_at: float = 0.0


@dataclass(slots=True)
class _Flight(Generic[T]):
    done: threading.Event = field(default_factory=threading.Event)
    result: _Entry[T] | None = None
    error: BadSignature | VerificationUnavailable | None = None

    def outcome(self) -> _Entry[T]:
        if self.result is not None:
            return self.result
        if self.error is not None:
            raise type(self.error)(self.error.message)  # a fresh exception per thread
        raise VerificationUnavailable("fetching the provider's key failed")


class Fetcher:
    """Bounded HTTPS exchanges with a provider's hosts: the one place hookinbox's sources
    reach the network for a key or a handshake (SNS's `SubscribeURL`)."""

    def __init__(
        self,
        *,
        feature: str,
        timeout: float = DEFAULT_TIMEOUT,
        max_bytes: int = MAX_KEY_BYTES,
        ssl_context: ssl.SSLContext | None = None,
        transport: httpx.BaseTransport | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        with importing(feature, "keys"):
            import certifi
            import httpx
        if timeout <= 0:
            raise ConfigurationError("the key fetch timeout must be positive")
        self._httpx = httpx
        self.timeout = timeout
        self.max_bytes = max_bytes
        # The provider's TLS certificate is checked against the public roots (certifi's),
        # unless a context or a transport is given: a test's own authority, an operator's.
        self._verify = ssl_context or ssl.create_default_context(cafile=certifi.where())
        self._transport = transport
        self._headers = {"accept": "*/*", **(headers or {})}
        self._lock = threading.Lock()
        self.sent = 0
        """Requests sent so far (the tests' count)."""

    def send(self, allow: AllowList, request: Fetch) -> tuple[int, float | None, bytes]:
        """Status, `max-age` and body of one exchange, redirects not followed; the URL is
        checked against `allow` right before the only network access."""
        httpx = self._httpx
        allow.check(request.url)
        deadline = time.monotonic() + self.timeout
        with self._lock:
            self.sent += 1
        try:
            with (
                httpx.Client(
                    verify=self._verify,
                    transport=self._transport,
                    timeout=self.timeout,
                    follow_redirects=False,
                ) as client,
                client.stream(
                    request.method, request.url, headers=self._headers, json=request.json
                ) as response,
            ):
                if response.is_redirect:
                    log.warning("%s answered a redirect: not followed", allow.what)
                    return response.status_code, None, b""
                body = bytearray()
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > self.max_bytes:
                        raise BadSignature(f"the document at {allow.what} is too large")
                    if time.monotonic() > deadline:
                        raise VerificationUnavailable(
                            f"{allow.what} took longer than {self.timeout:g} s"
                        )
                return response.status_code, _max_age(response.headers), bytes(body)
        except httpx.HTTPError as exc:
            log.warning("fetching %s failed: %r", allow.what, exc)
            raise VerificationUnavailable(
                f"{allow.what} cannot be fetched: {type(exc).__name__}"
            ) from exc


class KeyCache(Generic[T]):
    """Fetches, reads and caches one provider's keys by name; safe to share between threads.

    A name is what a delivery names (SNS's certificate URL, Plaid's key id) or one fixed URL
    (Google's key set); `locate` turns it into the request to send, whose URL the allow-list
    checks. `parse` reads a 200 answer (`BadSignature` if it is no key); `unknown` says
    whether another status means "no such key" (401) rather than an outage (503).
    """

    def __init__(
        self,
        allow: AllowList,
        parse: Callable[[bytes], Parsed[T]],
        fetcher: Fetcher,
        *,
        locate: Callable[[str], Fetch] = Fetch,
        unknown: Callable[[int, bytes], bool] = lambda status, body: False,
        default_max_age: float = 3600.0,
        cache_size: int = 16,
        new_key_interval: float = NEW_KEY_INTERVAL,
    ) -> None:
        if cache_size < 1:
            raise ConfigurationError("the key cache needs room for one key")
        self.allow = allow
        self.fetcher = fetcher
        self._parse = parse
        self._locate = locate
        self._unknown = unknown
        self.default_max_age = default_max_age
        self.cache_size = cache_size
        self.new_key_interval = new_key_interval
        self._cache: OrderedDict[str, _Entry[T]] = OrderedDict()
        self._flights: dict[str, _Flight[T]] = {}
        self._failed: dict[str, tuple[float, BadSignature | VerificationUnavailable]] = {}
        self._new_at = float("-inf")
        self._lock = threading.Lock()

    # -- what a delivery asks -----------------------------------------------------------------

    def get(self, name: str, *, now: float, want: Callable[[T], bool] | None = None) -> T:
        """The key (or key set) `name` names. With `want`, a cached value that lacks what the
        delivery needs (a key id Google has just rotated in) is fetched anew on the path, at
        most once a minute: an unsigned request naming random ids costs no fetch after the
        first."""
        self.allow.check(self._locate(name).url)
        with self._lock:
            entry = self._cache.get(name)
            if entry is not None and now <= entry.usable_until and now >= entry.fetched - MIN_AGE:
                self._cache.move_to_end(name)
                lacking = want is not None and not want(entry.value)
                if not lacking or now < entry.fetched + MIN_AGE:
                    if now > entry.fresh_until:
                        self._refresh_later(name, entry, now)
                    return entry.value
            failed = self._failed.get(name)
            if failed is not None and now < failed[0]:
                error = failed[1]
                raise type(error)(error.message)
            if entry is None and name not in self._flights:
                # A name never seen: one such fetch per interval, whoever asks.
                if now - self._new_at < self.new_key_interval and self._new_at <= now:
                    raise VerificationUnavailable(
                        f"{self.allow.what}: fetches of keys not yet known are paced"
                    )
                self._new_at = now
            flight = self._flights.get(name)
            leading = flight is None
            if flight is None:
                flight = self._flights[name] = _Flight()
        if not leading:
            flight.done.wait()
            return flight.outcome().value
        try:
            flight.result = self._fetch_entry(name, now)
        except (BadSignature, VerificationUnavailable) as error:
            flight.error = error
            with self._lock:
                self._failed[name] = (now + FAILURE_HOLD, error)
            raise
        finally:
            with self._lock:
                del self._flights[name]
            flight.done.set()
        return flight.result.value

    def cached(self, name: str) -> bool:
        with self._lock:
            return name in self._cache

    # -- fetching -------------------------------------------------------------------------------

    def _refresh_later(self, name: str, entry: _Entry[T], now: float) -> None:
        """Under the lock: fetch `name` again in a thread of its own, once at a time."""
        if entry.refreshing or now < entry.retry_at:
            return
        entry.refreshing = True
        thread = threading.Thread(
            target=self._refresh, args=(name, entry, now), name="hookinbox-key-refresh"
        )
        thread.daemon = True
        thread.start()

    def _refresh(self, name: str, entry: _Entry[T], now: float) -> None:
        try:
            self._fetch_entry(name, now)
        except (BadSignature, VerificationUnavailable) as error:
            # The cached key stays usable until its time is up; a later delivery tries again.
            log.warning("refreshing %s %s failed: %s", self.allow.what, name, error.message)
            with self._lock:
                entry.retry_at = now + MIN_AGE
        finally:
            entry.refreshing = False

    def _fetch_entry(self, name: str, now: float) -> _Entry[T]:
        request = self._locate(name)
        status, max_age, body = self.fetcher.send(self.allow, request)
        if status != 200:
            if self._unknown(status, body):
                raise BadSignature(f"the provider has no key at {self.allow.what} ({status})")
            raise VerificationUnavailable(
                f"the provider's key host answered {status} for {self.allow.what}"
            )
        parsed = self._parse(body)
        age = min(max(max_age if max_age is not None else self.default_max_age, MIN_AGE), MAX_AGE)
        limit = parsed.expires if parsed.expires is not None else float("inf")
        entry = _Entry(parsed.value, now, min(now + age, limit), min(now + 2 * age, limit))
        with self._lock:
            self._cache[name] = entry
            self._cache.move_to_end(name)
            self._failed.pop(name, None)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return entry


def _max_age(headers: Any) -> float | None:
    """`Cache-Control`'s `max-age`; 0 for `no-store`/`no-cache` (the cache's minimum then)."""
    value = ",".join(headers.get_list("cache-control"))
    if re.search(r"no-store|no-cache", value, re.IGNORECASE):
        return 0.0
    found = _MAX_AGE.search(value)
    return float(found.group(1)) if found else None
