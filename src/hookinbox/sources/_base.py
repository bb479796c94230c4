"""What every source is: a pure function of (headers, raw body, secrets, clock).

A source knows where a provider puts its signature, how the signature is built, and where the
event's idempotency key, type and time live. It knows nothing of storage or HTTP.

Two steps, always in this order:
1. `verify(headers, body, now=...)` on the exact raw bytes, before anything is decoded or written;
2. `identify(headers, body)`, which parses the body and finds the key, the type and the time.
Between them, `handshake(headers, body)` lets a provider's verified non-event (Slack's URL
check, Discord's PING, Zoom's and Twitch's challenges) be answered at once, in JSON or text,
with nothing stored; by default there is none. Handshakes outside a signed POST have hooks of
their own (docs/sources/README.md, "Handshakes"): `answer_get(query, headers)` for a GET or
HEAD on the source's path (Meta's `hub.challenge`, Dropbox's `challenge`, X's CRC, Okta's
verification, Trello's HEAD), and `check_query(query, headers, body)` for a POST whose query
string counts (Microsoft Graph's `validationToken`, Event Grid's key), called only for a
source that sets `reads_query`.

Every malformed input becomes a `VerificationError` (step 1) or a `PayloadError` (step 2 and the
handshake); nothing else escapes, which the property tests hold.

Here is the class hierarchy: `Source`, the contract; `SecretSource` and `TimestampedSource`,
which hold a provider's secrets and tolerance; `SignatureListSource`, a header listing a
timestamp and signatures (Stripe, Paddle); `BatchSource`, several events in one delivery.
What providers share besides lives beside it, one module per idea: `_signatures.py` (reading
and comparing signatures, signed timestamps), `_secrets.py` (secrets and their rotation),
`_identity.py` (the event's key, type and time in the body), `_handshakes.py` (a handshake's
query string and challenge). So a provider module says only where its headers, key, type and
time are.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from hookinbox._errors import (
    BadSignature,
    ConfigurationError,
    Handshake,
    PayloadError,
    TimestampOutOfTolerance,
    VerificationError,
)
from hookinbox.sources._handshakes import HandshakeAnswer, Query, SecretBook

# `_receiver.py` imports parse_query from here: its home is `_handshakes.py`.
from hookinbox.sources._handshakes import parse_query as parse_query
from hookinbox.sources._identity import (
    Identity,
    compact_json,
    invalid_identity,
    refuse_other_encodings,
)
from hookinbox.sources._json_slices import JsonSlice
from hookinbox.sources._secrets import secrets_tuple, utf8_key
from hookinbox.sources._signatures import (
    DEFAULT_TOLERANCE,
    MAX_EXPENSIVE_CANDIDATES,
    Headers,
    check_signature_count,
    check_signature_headers,
    header_values,
    timestamp_groups,
    timestamped_signatures,
    verify_timestamped,
)

if TYPE_CHECKING:
    from hookinbox.sources._provider_api import Listing


class Source(ABC):
    """A webhook provider's verification and identification rules, configured with secrets."""

    default_name: ClassVar[str]
    redelivery_window: timedelta = timedelta(days=3)
    """How long the provider may send an event again (automatic retries or a manual resend).
    The retention must be longer, or a pruned key could no longer deduplicate a redelivery."""
    stored_headers: tuple[str, ...] = ()
    """Header names (lower case) kept with the event to re-verify and audit it. Never secrets."""
    signature_headers: tuple[str, ...] = ()
    """Header names (lower case) `verify` reads: each is refused (401) past
    `MAX_SIGNATURE_HEADER` characters before `verify` runs. A test holds that every source
    class names the headers its signatures travel in."""
    verifies_over_network: ClassVar[bool] = False
    """True when verifying may call the provider (a certificate, an API): the ASGI app then
    verifies in a worker thread instead of on its event loop."""
    batched: ClassVar[bool] = False
    """True for a `BatchSource`: one delivery carries several events (`authenticate_batch`)."""
    acknowledgement: ClassVar[str | None] = None
    """The plain-text body of a 2xx answer to an event delivery (accepted or duplicate), for a
    provider that requires one (Adyen: `[accepted]`); None answers the JSON of
    docs/ingest.md. Refusals and handshakes keep their own bodies."""
    answers_get: ClassVar[bool] = False
    """True for a source whose provider sends a GET or HEAD to its path (`answer_get`); the
    others answer both 405, as every other method but POST."""
    answers_options: ClassVar[bool] = False
    """True for a source whose provider validates its path with an OPTIONS request
    (`answer_options`: Event Grid's CloudEvents schema); the others answer it 405."""
    learns_secrets: ClassVar[bool] = False
    """True for a source that learns its secret from a first handshake (Asana): the receiver
    hands it where such secrets are kept (`attach_secrets`) when it starts."""
    reads_query: ClassVar[bool] = False
    """True for a source whose POSTs are judged with their query string (`check_query`): only
    for these does the receiver parse it, so the others pay nothing for it."""

    def __init__(self, *, name: str | None = None) -> None:
        self.name = self.default_name if name is None else name
        if not self.name or "/" in self.name or len(self.name) > 64:
            raise ConfigurationError(f"invalid source name {self.name!r}")

    @abstractmethod
    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        """Raise a `VerificationError` unless the delivery is authentic and fresh."""

    @abstractmethod
    def identify(self, headers: Headers, body: bytes) -> Identity:
        """Parse a verified delivery; raise `PayloadError` if it names no event."""

    def listing(self) -> Listing:
        """What `hookinbox reconcile` lists from the provider's API (`_provider_api.py`).

        Only a source configured with the provider's API credentials has one (Stripe's
        `api_key`); the others raise `ConfigurationError`, one line saying so."""
        raise ConfigurationError(
            f"source {self.name!r} ({type(self).__name__}) cannot reconcile: hookinbox lists "
            "events from Stripe's, GitHub's and Square's APIs (docs/reconcile.md)"
        )

    def handshake(self, headers: Headers, body: bytes) -> HandshakeAnswer | None:
        """The answer to a verified delivery that is a handshake rather than an event.

        An answer is sent at once and nothing is stored: a dict as JSON with 200 (Slack's
        `url_verification` challenge, Discord's PING), a string as `text/plain` with 200
        (Twitch's challenge), or a `Handshake` to choose the content type or the status.
        None, the default, goes on to `identify`. Called by `authenticate`, only after
        `verify` succeeded; may raise `PayloadError`.
        """
        return None

    def answer_get(self, query: Query, headers: Headers) -> HandshakeAnswer | None:
        """The answer to a GET (or HEAD, answered alike without its body) on the source's path.

        For a provider that checks the endpoint with one (Meta's `hub.challenge`, Dropbox's
        `challenge`, X's CRC, Okta's verification, Trello's HEAD); a source that has one sets
        `answers_get`. Nothing is stored. The answer is what `handshake` returns; raise
        `VerificationError` for a request that does not prove itself (a wrong verify token:
        answered 403) and `PayloadError` for one that is not the provider's (400). None, the
        default, answers 405 as for a source without one.
        """
        return None

    def answer_options(self, query: Query, headers: Headers) -> HandshakeAnswer | None:
        """The answer to an OPTIONS on the source's path, for a source that sets
        `answers_options` (CloudEvents' abuse protection: `WebHook-Request-Origin` answered
        with `WebHook-Allowed-Origin`). Raised and answered as `answer_get`'s: a
        `VerificationError` is 403, a `PayloadError` 400, None 405; nothing is stored.
        """
        return None

    def attach_secrets(self, book: SecretBook) -> None:
        """For a source that `learns_secrets`: keep and read them in `book`."""
        raise TypeError(f"{type(self).__name__} learns no secrets")

    def check_query(self, query: Query, headers: Headers, body: bytes) -> HandshakeAnswer | None:
        """For a source that `reads_query`: judge a POST's query string before anything else.

        Return an answer for a handshake that lives there (Microsoft Graph's
        `validationToken`), raise `VerificationError` when the query fails to prove the
        delivery (Event Grid's key), or return None to go on with `verify`.
        """
        return None

    def _query_answer(self, query: Query | None, headers: Headers, body: bytes) -> None:
        """`check_query`'s answer raised as a `Handshake`, for a source that reads its query."""
        if query is None:
            query = {}
        answer = self.check_query(query, headers, body)
        if isinstance(answer, Handshake):
            raise answer
        if answer is not None:
            raise Handshake(answer)

    def authenticate(
        self, headers: Headers, body: bytes, *, now: float, query: Query | None = None
    ) -> Identity:
        """Verify, then identify: the body is not decoded before it is proven authentic.

        A verified handshake raises `Handshake` with the source's answer (the receiver sends
        it with 200 and stores nothing). `query` is the request's parsed query string, which
        the receiver passes only to a source that `reads_query`.
        """
        if self.reads_query:
            self._query_answer(query, headers, body)
        check_signature_headers(headers, self.signature_headers)
        self.verify(headers, body, now=now)
        # After verifying (a forged body stays 401) and before the handshake (a UTF-16 Zoom
        # challenge is refused, not taken for an event): see `refuse_other_encodings`.
        refuse_other_encodings(body)
        answer = self.handshake(headers, body)
        if isinstance(answer, Handshake):
            raise answer
        if answer is not None:
            raise Handshake(answer)
        return self.identify(headers, body)

    def check_and_verify(
        self, headers: Headers, body: bytes, *, now: float, query: Query | None = None
    ) -> None:
        """`authenticate`'s first half: the query (a source that reads it), bound the signature
        headers, verify, refuse a body that is not plain UTF-8."""
        if self.reads_query:
            self._query_answer(query, headers, body)
        check_signature_headers(headers, self.signature_headers)
        self.verify(headers, body, now=now)
        refuse_other_encodings(body)

    def headers_to_store(self, headers: Headers) -> dict[str, str]:
        kept = ("content-type", "user-agent", *self.stored_headers)
        return {name: headers[name] for name in kept if name in headers}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class SecretSource(Source):
    """A source verified with one or more secrets (several while one is rotated)."""

    def __init__(self, *, secret: str | Sequence[str], name: str | None = None) -> None:
        super().__init__(name=name)
        self._keys = [self.decode_key(s) for s in secrets_tuple(secret)]

    @staticmethod
    def decode_key(secret: str) -> bytes:
        """The HMAC key of one configured secret."""
        return utf8_key(secret)


class TimestampedSource(SecretSource):
    """A source whose signature covers a timestamp, held within `tolerance` seconds of now."""

    def __init__(
        self,
        *,
        secret: str | Sequence[str],
        name: str | None = None,
        tolerance: float | None = DEFAULT_TOLERANCE,
    ) -> None:
        super().__init__(secret=secret, name=name)
        self.tolerance = tolerance


class SignatureListSource(TimestampedSource):
    """One header listing a timestamp and hex HMAC-SHA256 signatures (Stripe, Paddle).

    `{timestamp_name}=<unix>{separator}{signature_name}=<hex>[{separator}...]`, each signature
    over `{timestamp}{joiner}{body}`; any signature may match any secret.
    """

    signature_header: ClassVar[str]
    header_label: ClassVar[str]
    separator: ClassVar[str]
    timestamp_name: ClassVar[str]
    signature_name: ClassVar[str]
    joiner: ClassVar[bytes]
    per_second: ClassVar[int] = 1
    """1 for a timestamp in seconds; 1000 where the provider signs milliseconds (WorkOS)."""

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        """Each timestamp with its signatures is checked on its own: a header repeated (its
        values apart, or joined by a WSGI server) lists several, and one verifying is enough.

        Each distinct timestamp is another signed message over the whole body: groups that
        share one are checked together (one HMAC per secret), and more than
        `MAX_EXPENSIVE_CANDIDATES` distinct timestamps are refused before any HMAC."""
        # The values joined as a server would: `t=1` and `v1=...` sent apart are one group.
        # A WSGI server joins the values with ","; each value starts with its timestamp, so a
        # comma before a timestamp entry separates too (Paddle's separator is ";").
        joined = self.separator.join(header_values(headers, self.signature_header))
        if self.separator != ",":
            joined = re.sub(rf",\s*(?={re.escape(self.timestamp_name)}=)", self.separator, joined)
        groups = timestamp_groups(joined, self.separator, self.timestamp_name)
        # The limit holds across groups: every entry but the timestamps is a signature.
        check_signature_count(joined.count(self.separator) + 1 - len(groups), self.header_label)
        failures: list[VerificationError] = []
        by_time: dict[str, list[bytes]] = {}
        for group in groups:
            try:
                timestamp_text, candidates = timestamped_signatures(
                    group,
                    what=self.header_label,
                    separator=self.separator,
                    timestamp_name=self.timestamp_name,
                    signature_name=self.signature_name,
                )
            except VerificationError as exc:
                failures.append(exc)
                continue
            by_time.setdefault(timestamp_text.strip(), []).extend(candidates)
        if len(by_time) > MAX_EXPENSIVE_CANDIDATES:
            raise BadSignature(
                f"{self.header_label} lists more than {MAX_EXPENSIVE_CANDIDATES} timestamps (each "
                "is another signed message over the whole body)"
            )
        for timestamp_text, candidates in by_time.items():
            try:
                verify_timestamped(
                    self._keys,
                    candidates,
                    timestamp_text,
                    body,
                    now=now,
                    tolerance=self.tolerance,
                    separator=self.joiner,
                    per_second=self.per_second,
                )
                return
            except VerificationError as exc:
                failures.append(exc)
        # A genuine but late signature says more than a forged one beside it.
        late = [f for f in failures if isinstance(f, TimestampOutOfTolerance)]
        raise (late or failures)[0]


MAX_BATCH_EVENTS = 1000
"""The most events one batched delivery may carry (SendGrid, HubSpot, Adyen); a longer batch is
refused whole (400). Providers send far fewer (HubSpot at most 100, Adyen one to a few), and
the bound keeps one request's events within one group-commit statement's parameters."""


class BatchSource(Source):
    """A provider that puts several events in one signed delivery (SendGrid, HubSpot, Adyen).

    `identify_batch` turns a verified body into one `Identity` per event, each with its own
    id and the bytes to store for it (`Identity.body`: the event's own JSON, not the whole
    batch, so a handler reads one event and a redelivery of it hashes alike). The receiver
    stores them in one transaction and answers once. A body that is no batch at all (not
    the provider's list, empty, over `MAX_BATCH_EVENTS`) is refused whole (400). An event
    of a readable batch that names no usable id is not a reason to lose the others: these
    providers do not retry a 4xx, so refusing the batch would drop every valid event in it.
    It is stored as `invalid` instead (`identify_items`), where an operator sees it, and the
    delivery is answered 2xx.
    """

    batched: ClassVar[bool] = True

    @abstractmethod
    def identify_batch(self, headers: Headers, body: bytes) -> list[Identity]:
        """One identity per event of a verified delivery; `PayloadError` if any is unusable."""

    def identify(self, headers: Headers, body: bytes) -> Identity:
        """The event of a batch of one (the receiver itself calls `identify_batch`)."""
        identities = self.identify_batch(headers, body)
        if len(identities) != 1:
            raise PayloadError(f"a batch of {len(identities)} events: use identify_batch")
        if identities[0].invalid is not None:
            raise PayloadError(identities[0].invalid)
        return identities[0]

    @staticmethod
    def identify_items(
        items: Iterable[JsonSlice], identify: Callable[[Any], Identity]
    ) -> list[Identity]:
        """`identify` of each event of a batch, stored as its own bytes; one it refuses
        (`PayloadError`) becomes an `invalid` identity (`invalid_identity`) rather than
        failing the batch."""
        identities = []
        for item in items:
            try:
                identity = identify(item.value)
            except PayloadError as error:
                identities.append(invalid_identity(item, error.message))
                continue
            # A retry may format the batch anew: what it must repeat is the event's JSON.
            fingerprint = identity.fingerprint or compact_json(item.value)
            identities.append(replace(identity, body=item.raw, fingerprint=fingerprint))
        return identities

    def authenticate_batch(
        self, headers: Headers, body: bytes, *, now: float, query: Query | None = None
    ) -> list[Identity]:
        """`authenticate` for a batch: verify the body, then one identity per event."""
        self.check_and_verify(headers, body, now=now, query=query)
        answer = self.handshake(headers, body)
        if isinstance(answer, Handshake):
            raise answer
        if answer is not None:
            raise Handshake(answer)
        identities = self.identify_batch(headers, body)
        if not identities:
            raise PayloadError("the batch holds no event")
        if len(identities) > MAX_BATCH_EVENTS:
            raise PayloadError(f"the batch holds more than {MAX_BATCH_EVENTS} events")
        return identities
