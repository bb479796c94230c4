"""`RedisClaims`: the claim protocol on a synchronous redis-py client (single server or Cluster)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, ClassVar, Generic, ParamSpec, Self, TypeVar

from redis import Redis, RedisCluster
from redis.exceptions import AskError, MovedError, ResponseError, TryAgainError

from hookinbox._logging import logger
from hookinbox.claims._errors import translated
from hookinbox.claims._protocol import (
    CLAIM_ATTEMPTS,
    COMPLETE_SCRIPT,
    DEFAULT_CLAIM_RETENTION,
    DEFAULT_LEASE_SECONDS,
    DEFAULT_PREFIX,
    EXTEND_SCRIPT,
    RELEASE_SCRIPT,
    Claim,
    ClaimOptions,
    ClaimState,
    check_lease,
    claim_key,
    milliseconds,
    parse_state,
    settle,
    still_changing,
)

log = logger("hookinbox.claims")

DEFAULT_TIMEOUT = 2.0
"""Seconds to connect or answer before a command counts as failed: a hung Redis must turn
into a 503, not hold the provider's request until its own timeout."""

P = ParamSpec("P")
R = TypeVar("R")


ClientT = TypeVar("ClientT")


class ClaimStoreBase(Generic[ClientT]):
    """What the synchronous and the asyncio store share: the client, options and scripts."""

    asynchronous: ClassVar[bool] = False

    def __init__(
        self,
        client: ClientT,
        *,
        prefix: str = DEFAULT_PREFIX,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        retention: timedelta = DEFAULT_CLAIM_RETENTION,
    ) -> None:
        self.client = client
        self.options = ClaimOptions(prefix, lease_seconds, retention)
        register: Any = getattr(client, "register_script")  # noqa: B009 - both clients have it
        self._complete = register(COMPLETE_SCRIPT)
        self._release = register(RELEASE_SCRIPT)
        self._extend = register(EXTEND_SCRIPT)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        cluster: bool = False,
        timeout: float = DEFAULT_TIMEOUT,
        prefix: str = DEFAULT_PREFIX,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        retention: timedelta = DEFAULT_CLAIM_RETENTION,
    ) -> Self:
        """Connect lazily to `url` (`redis://host:6379/0`, `rediss://...`); `cluster=True` for
        Redis Cluster. `timeout` bounds connecting and each command."""
        client = _client_from_url(
            url, cluster=cluster, timeout=timeout, asynchronous=cls.asynchronous
        )
        return cls(client, prefix=prefix, lease_seconds=lease_seconds, retention=retention)

    @property
    def retention(self) -> timedelta:
        return self.options.retention

    def __repr__(self) -> str:
        return f"{type(self).__name__}(prefix={self.options.prefix!r}, retention={self.retention})"


def _client_from_url(url: str, *, cluster: bool, timeout: float, asynchronous: bool) -> Any:
    from redis import asyncio as aioredis

    kinds = {
        (False, False): Redis,
        (False, True): RedisCluster,
        (True, False): aioredis.Redis,
        (True, True): aioredis.RedisCluster,
    }
    kind: Any = kinds[asynchronous, cluster]
    return kind.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)


class RedisClaims(ClaimStoreBase[Redis | RedisCluster]):
    """Claims kept in Redis: `claim`, then `complete` or `release`; or `with once(...)`.

    `client` is a `redis.Redis` or `redis.cluster.RedisCluster` (or use `from_url`).
    """

    # -- the protocol --------------------------------------------------------------------

    def claim(self, source: str, event_id: str, *, lease_seconds: float | None = None) -> Claim:
        """Claim (source, event_id) for `lease_seconds` (default: the store's lease).

        Raises `AlreadyDone` or `InProgress` if it is claimed already, and
        `ClaimStoreUnavailable` if Redis cannot tell.
        """
        claim = self.options.new_claim(source, event_id, lease_seconds)
        lease_ms = milliseconds(claim.lease_seconds)
        with translated("claim"):
            for _ in range(CLAIM_ATTEMPTS):
                if _set_if_free(self.client, claim, lease_ms):
                    return claim
                if settle(claim, self.client.get(claim.key)):
                    return claim
        raise still_changing(claim.key)

    def complete(self, claim: Claim) -> bool:
        """Mark the claim done for the retention; False if another holder has the key now."""
        with translated("mark the claim done"):
            args: list[str | int] = [
                claim.in_progress_value,
                claim.done_value,
                self.options.retention_ms,
            ]
            return bool(self._complete(keys=[claim.key], args=args))

    def release(self, claim: Claim) -> bool:
        """Delete the claim if it is still ours, so the next claimant runs the work again."""
        with translated("release the claim"):
            return bool(self._release(keys=[claim.key], args=[claim.in_progress_value]))

    def extend(self, claim: Claim, lease_seconds: float | None = None) -> bool:
        """Restart the claim's lease (for work that runs longer than planned); False if lost."""
        lease = claim.lease_seconds if lease_seconds is None else check_lease(lease_seconds)
        with translated("extend the claim"):
            args: list[str | int] = [claim.in_progress_value, milliseconds(lease)]
            return bool(self._extend(keys=[claim.key], args=args))

    def state(self, source: str, event_id: str) -> ClaimState | None:
        """What the key holds now: in progress, done, or None (never claimed, or released)."""
        with translated("read the claim"):
            found = parse_state(self.client.get(claim_key(self.options.prefix, source, event_id)))
        return None if found is None else found[0]

    def ping(self) -> None:
        """Raise `ClaimStoreUnavailable` unless Redis answers."""
        with translated("reach Redis"):
            self.client.ping()

    def close(self) -> None:
        self.client.close()

    # -- conveniences --------------------------------------------------------------------

    @contextmanager
    def once(
        self, source: str, event_id: str, *, lease_seconds: float | None = None
    ) -> Iterator[Claim]:
        """Run the block only if (source, event_id) is not claimed; mark it done after.

        The block raising releases the claim (a later call runs it again) and re-raises.
        A claimed key raises `AlreadyDone` or `InProgress` before the block runs.
        """
        claim = self.claim(source, event_id, lease_seconds=lease_seconds)
        try:
            yield claim
        except BaseException:
            try:
                self.release(claim)
            except Exception as error:
                release_failed(claim, error)
            raise
        if not self.complete(claim):
            warn_lost(claim)

    def idempotent(
        self, source: str, key: Callable[P, str], *, lease_seconds: float | None = None
    ) -> Callable[[Callable[P, R]], Callable[P, R]]:
        """Decorate a function to run once per `key(*args, **kwargs)`, as `once` does."""

        def decorate(function: Callable[P, R]) -> Callable[P, R]:
            @functools.wraps(function)
            def run_once(*args: P.args, **kwargs: P.kwargs) -> R:
                with self.once(source, key(*args, **kwargs), lease_seconds=lease_seconds):
                    return function(*args, **kwargs)

            return run_once

        return decorate


def _set_if_free(client: Redis | RedisCluster, claim: Claim, lease_ms: int) -> bool:
    """`SET key progress:<token> NX PX lease`, withdrawn when its answer does not come in time.

    A command that timed out is not gone: it waits in the socket, and a hung Redis runs it when
    it wakes up. The key would then say "in progress" for the whole lease, though the delivery
    was answered 503 and no handler runs, and every retry would be answered 409 until it
    expired. So on a timeout the compare-and-delete of this claim's token is sent on the same
    connection, behind the SET: Redis runs one connection's commands in order, so whenever the
    SET runs, the release runs right after it. That connection is then closed, never reused.
    """
    node: Any = client
    if isinstance(client, RedisCluster):  # the node that serves the key's slot
        cluster: Any = client
        node = cluster.get_redis_connection(cluster.get_node_from_key(claim.key))
    pool = node.connection_pool
    connection = _pooled_connection(pool)
    sent = False
    try:
        connection.send_command("SET", claim.key, claim.in_progress_value, "NX", "PX", lease_ms)
        sent = True
        reply = connection.read_response(disconnect_on_error=False)
    except (MovedError, AskError, TryAgainError):
        # Cluster resharding: the answer came (a redirect), nothing was set; let the cluster
        # client follow it and refresh its slot map.
        pool.release(connection)
        return bool(client.set(claim.key, claim.in_progress_value, nx=True, px=lease_ms))
    except ResponseError:
        pool.release(connection)  # an answer: the connection is in step
        raise
    except BaseException:
        if sent:  # unsent (Redis down, a write cut short), there is nothing to withdraw
            _withdraw(connection, claim)
        connection.disconnect()
        pool.release(connection)
        raise
    pool.release(connection)
    return reply is not None


def _pooled_connection(pool: Any) -> Any:
    try:
        return pool.get_connection()
    except TypeError:  # redis-py before 5.3 wants the command's name
        return pool.get_connection("SET")


def _withdraw(connection: Any, claim: Claim) -> None:
    """Queue the release of `claim` behind its unanswered SET (the caller then closes it)."""
    try:
        connection.send_command(
            "EVAL", RELEASE_SCRIPT, 1, claim.key, claim.in_progress_value, check_health=False
        )
    except Exception as error:  # the socket is gone: so is the SET, unless Redis had it
        withdraw_failed(claim, error)


def withdraw_failed(claim: Claim, error: Exception) -> None:
    log.warning(
        "%s: could not withdraw the unanswered claim (%s); if Redis had it, it expires after "
        "its %g s lease",
        claim.key,
        error,
        claim.lease_seconds,
    )


def release_failed(claim: Claim, error: Exception) -> None:
    """After a failure the claim could not be released: the failure still propagates, and the
    lease ends the claim."""
    log.warning(
        "%s: could not release the claim (%s); it expires after its %g s lease",
        claim.key,
        error,
        claim.lease_seconds,
    )


def warn_lost(claim: Claim) -> None:
    log.warning(
        "%s: done, but its %g s lease ran out first and another holder has the key: the work "
        "may run twice; use a longer lease",
        claim.key,
        claim.lease_seconds,
    )
