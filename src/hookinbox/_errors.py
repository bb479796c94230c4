"""Every error hookinbox raises on purpose.

    HookinboxError
    ├── ConfigurationError          the application is set up wrongly (bad URL, unknown source name)
    │   └── MissingExtra            a feature's optional dependencies are not installed (also
    │                               an ImportError); its message names the extra to install
    ├── VerificationError           the delivery is not authentic              -> HTTP 401
    │   ├── MissingHeader
    │   ├── BadSignature
    │   └── TimestampOutOfTolerance
    ├── PayloadError                authentic, but not an event we can store   -> HTTP 400
    ├── VerificationUnavailable     cannot be verified now (provider API down) -> HTTP 503
    ├── DeliveryIgnored             names nothing the provider knows: kept out -> HTTP 200
    ├── Handshake                   a provider's handshake (Slack's URL check) -> its answer (200)
    ├── UnknownSource               no source of that name                     -> HTTP 404
    ├── BodyTooLarge                over the configured limit                  -> HTTP 413
    ├── StoreUnavailable            the database cannot take the write now     -> HTTP 503
    │   ├── AckDeadlinePassed       not stored within the ack deadline (a held lock, a stall)
    │   └── ClaimStoreUnavailable   Redis (claim mode) cannot be reached or refused the command
    ├── BrokerUnavailable           a broker consumer cannot reach its RabbitMQ or NATS server
    ├── ClaimTaken                  `claims.once(...)`: the key is claimed already
    │   ├── AlreadyDone             ... and its work is done: skip it
    │   └── InProgress              ... by a holder still working: try again later
    └── NotReady                    raised by a handler: retry later, no failure counted

Each class's docstring is its default message. Driver errors (sqlite3, psycopg) are translated
into `StoreUnavailable` in one place, `hookinbox._storage._errors`, and kept as `__cause__`;
redis-py's errors into `ClaimStoreUnavailable` in `hookinbox.claims._errors`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


class HookinboxError(Exception):
    """hookinbox failed."""

    def __init__(self, message: str | None = None) -> None:
        default = (self.__doc__ or type(self).__name__).strip().splitlines()[0]
        super().__init__(message or default)

    @property
    def message(self) -> str:
        return str(self)


class ConfigurationError(HookinboxError):
    """hookinbox is configured wrongly."""


class MissingExtra(ConfigurationError, ImportError):
    """A feature's optional dependencies are not installed.

    One line naming the feature and the extra that installs it (`pip install
    'hookinbox[server]'`). Also an `ImportError`, so code that probes for an optional feature
    with `except ImportError` keeps working.
    """

    def __init__(self, feature: str, extras: tuple[str, ...], what: str) -> None:
        super().__init__(f"{feature} needs {what}: pip install 'hookinbox[{','.join(extras)}]'")
        self.feature = feature
        self.extras = extras


class VerificationError(HookinboxError):
    """The delivery could not be verified."""


class MissingHeader(VerificationError):
    """A header needed to verify the delivery is missing."""


class BadSignature(VerificationError):
    """No signature on the delivery matches the body and a configured secret."""


class TimestampOutOfTolerance(VerificationError):
    """The signed timestamp is too far from the current time."""


class PayloadError(HookinboxError):
    """The body is not an event that can be stored."""


class VerificationUnavailable(HookinboxError):
    """The delivery cannot be verified right now; the provider should retry.

    Raised by sources that verify through the provider's own service (PayPal's certificate
    host or verification API, Mollie's API) when that service cannot be reached or fails.
    It is not the sender's fault, so the answer is 503 with `Retry-After`, not 401.
    """


class BrokerUnavailable(HookinboxError):
    """The broker cannot be reached: a consumer (`hookinbox.brokers`) cannot connect to its
    RabbitMQ or NATS server, or lost it for good."""


class DeliveryIgnored(HookinboxError):
    """The delivery names nothing the provider knows; it is acknowledged and not stored.

    Mollie's classic webhooks carry only an id; an id Mollie's API does not know is answered
    200 like a known one, so the endpoint does not tell a caller which ids exist.
    """


class Handshake(HookinboxError):
    """The delivery is a provider's handshake: answered at once and not stored.

    Raised by `Source.authenticate` when the source's `handshake` has an answer for a verified
    delivery (Slack's `url_verification` challenge, Discord's PING, Zoom's URL validation,
    Twitch's callback verification), or by `Source.answer_get` for a GET or HEAD (Meta's
    `hub.challenge`, Dropbox's `challenge`, X's CRC). `answer` is the reply body: a dict is
    sent as JSON, a string as it stands (`text/plain` unless `content_type` says otherwise);
    `status` is the status code (200 unless the provider wants another); `headers` are sent
    with it (Asana's `X-Hook-Secret` echoed).
    """

    def __init__(
        self,
        answer: dict[str, Any] | str,
        *,
        content_type: str | None = None,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.answer = answer
        self.status = status
        self.headers = dict(headers or {})
        if content_type is None:
            json_answer = isinstance(answer, dict)
            content_type = "application/json" if json_answer else "text/plain; charset=utf-8"
        self.content_type = content_type

    @property
    def content(self) -> bytes:
        """The bytes sent: compact JSON for a dict (as every other reply), else UTF-8 text."""
        if isinstance(self.answer, dict):
            return json.dumps(self.answer, separators=(",", ":")).encode()
        return self.answer.encode()


class UnknownSource(HookinboxError):
    """No source is configured under that name."""


class BodyTooLarge(HookinboxError):
    """The body is larger than the configured limit."""


class StoreUnavailable(HookinboxError):
    """The database is unavailable."""


class AckDeadlinePassed(StoreUnavailable):
    """The delivery was not stored within the ack deadline."""

    def __init__(self, deadline: float) -> None:
        super().__init__(f"not stored within the ack deadline ({deadline:g} s): retry later")


class ClaimStoreUnavailable(StoreUnavailable):
    """The claim store (Redis) is unavailable."""


class ClaimTaken(HookinboxError):
    """The key is claimed already."""


class AlreadyDone(ClaimTaken):
    """The key is claimed and its work is done."""


class InProgress(ClaimTaken):
    """The key is claimed by a holder whose work is still in progress; try again later."""


class NotReady(HookinboxError):
    """The event cannot be applied yet; retry it later without counting a failure.

    Raise it from a handler when a predecessor event has not been applied yet (an update
    that arrived before its create). The handler's writes roll back and the event is
    retried with backoff until the source's not-ready deadline.
    """

    def __init__(self, reason: str | None = None, *, retry_in: float | None = None) -> None:
        super().__init__(reason)
        self.retry_in = retry_in
