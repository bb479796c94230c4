"""`ClaimInbox`: an inbox with no SQL database, deduplicating deliveries with Redis claims.

The sibling of `Inbox`: the same sources, handler registration and HTTP contract (both are
`BaseInbox`), but each delivery is claimed in Redis and its handlers run inline, in the
request; the provider's redelivery is the only retry (docs/redis-claims.md).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from hookinbox._errors import ConfigurationError
from hookinbox._inbox import BaseInbox
from hookinbox._operations._prune import check_retention
from hookinbox._processing._handlers import ANY_TYPE
from hookinbox._receiver import BaseReceiver
from hookinbox._registry import Registry, check_handler_source
from hookinbox._settings import (
    DEFAULT_ACK_DEADLINE,
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_MAX_BODY_SIZE,
    DEFAULT_RETRY_AFTER,
    ReceiverSettings,
    current_overrides,
    resolve_receiver,
)
from hookinbox.claims._protocol import check_source
from hookinbox.claims._receiver import ClaimReceiver, check_in_progress_status
from hookinbox.claims._redis import RedisClaims
from hookinbox.sources import Source

F = TypeVar("F", bound=Callable[..., Any])
S = TypeVar("S", bound=Source)


class ClaimInbox(BaseInbox):
    """Verified deliveries, claimed once in Redis, handled inline; no SQL database.

    `in_progress_status` (409, the default, or 200) answers a copy that arrives while another
    copy's handlers run. `allow_short_retention` admits a source whose redelivery window is
    longer than the claims' retention (a redelivery after the claim expired runs again).
    """

    def __init__(
        self,
        claims: RedisClaims,
        *,
        sources: Iterable[Source] = (),
        in_progress_status: int | None = None,
        max_body_size: int = DEFAULT_MAX_BODY_SIZE,
        body_timeout: float = DEFAULT_BODY_TIMEOUT,
        retry_after: int = DEFAULT_RETRY_AFTER,
        ack_deadline: float | None = DEFAULT_ACK_DEADLINE,
        clock: Callable[[], float] = time.time,
        allow_short_retention: bool = False,
    ) -> None:
        if not isinstance(claims, RedisClaims):
            raise ConfigurationError(f"ClaimInbox takes a RedisClaims, not {claims!r}")
        if current_overrides().database_url:
            raise ConfigurationError(
                "a ClaimInbox keeps no SQL database: --database-url does not apply"
            )
        self.claims = claims
        self._in_progress_status = check_in_progress_status(in_progress_status)
        self.settings: ReceiverSettings = resolve_receiver(
            max_body_size=max_body_size,
            body_timeout=body_timeout,
            retry_after=retry_after,
            ack_deadline=ack_deadline,
            clock=clock,
        )
        self._allow_short_retention = allow_short_retention
        self._registry = Registry()
        self._claim_receiver: ClaimReceiver | None = None
        self._lock = threading.Lock()
        for source in sources:
            self.add_source(source)

    def add_source(self, source: S, *, inline: bool = True) -> S:
        """Receive deliveries for `source`; its handlers always run inline, in the request."""
        if not inline:
            raise ConfigurationError(
                "an inbox with Redis claims has no queue: its sources are always inline"
            )
        self._check_not_started()
        if isinstance(source, Source):
            check_source(source.name)  # now, not at the first delivery
            check_retention(self.claims.retention, [source], force=self._allow_short_retention)
        self._registry.add_source(source, inline=True, retry=None)
        return source

    def handler(self, source: str, event_type: str = ANY_TYPE, **options: Any) -> Callable[[F], F]:
        """Register `function(event, ctx)`, sync or async, for `source` events of `event_type`.

        `ctx` is a `ClaimContext`: there is no database transaction, ordering guard or
        outbox. Handlers take no business_key, max_attempts or retry: they run inline, and the
        provider's redelivery is the retry.
        """
        check_handler_source(source, event_type)
        if options:
            raise ConfigurationError(
                "with Redis claims, handlers take no business_key, max_attempts or retry: "
                "they run inline, and the provider's redelivery is the retry"
            )

        def register(function: F) -> F:
            self._register_handler(source, event_type, function)
            return function

        return register

    @property
    def in_progress_status(self) -> int:
        """The status answering a copy that arrives while another copy's handlers run."""
        return self._in_progress_status

    @property
    def started(self) -> bool:
        return self._claim_receiver is not None

    def _receiver(self) -> BaseReceiver:
        if self._claim_receiver is None:
            with self._lock:
                if self._claim_receiver is None:
                    self._registry.check()
                    self._claim_receiver = ClaimReceiver(
                        self.claims,
                        self._registry.sources,
                        self._registry.handlers,
                        self.settings,
                        in_progress_status=self._in_progress_status,
                    )
        return self._claim_receiver

    def close(self) -> None:
        self.claims.close()

    def __repr__(self) -> str:
        return f"ClaimInbox({self.claims!r}, sources={sorted(self.sources)})"
