"""`AsyncRedisClaims`: the claim protocol on redis-py's asyncio client, for async applications."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, ParamSpec, TypeVar

from redis.asyncio import Redis, RedisCluster
from redis.exceptions import ResponseError

from hookinbox.claims._errors import translated
from hookinbox.claims._protocol import (
    CLAIM_ATTEMPTS,
    RELEASE_SCRIPT,
    Claim,
    ClaimState,
    check_lease,
    claim_key,
    milliseconds,
    parse_state,
    settle,
    still_changing,
)
from hookinbox.claims._redis import ClaimStoreBase, release_failed, warn_lost, withdraw_failed


async def _pooled_connection(pool: Any) -> Any:
    try:
        return await pool.get_connection()
    except TypeError:  # redis-py before 5.3 wants the command's name
        return await pool.get_connection("SET")


async def _withdraw(connection: Any, claim: Claim) -> None:
    """Queue the release of `claim` behind its unanswered SET (the caller then closes it)."""
    try:
        await connection.send_command(
            "EVAL", RELEASE_SCRIPT, 1, claim.key, claim.in_progress_value, check_health=False
        )
    except Exception as error:  # the socket is gone: so is the SET, unless Redis had it
        withdraw_failed(claim, error)


P = ParamSpec("P")
R = TypeVar("R")


class AsyncRedisClaims(ClaimStoreBase[Redis | RedisCluster]):
    """`RedisClaims` for asyncio: the same keys and values, so both can share a prefix.

    `client` is a `redis.asyncio.Redis` or `redis.asyncio.cluster.RedisCluster`.
    """

    asynchronous = True

    async def claim(
        self, source: str, event_id: str, *, lease_seconds: float | None = None
    ) -> Claim:
        """As `RedisClaims.claim`."""
        claim = self.options.new_claim(source, event_id, lease_seconds)
        lease_ms = milliseconds(claim.lease_seconds)
        with translated("claim"):
            for _ in range(CLAIM_ATTEMPTS):
                if await self._set_if_free(claim, lease_ms):
                    return claim
                if settle(claim, await self.client.get(claim.key)):
                    return claim
        raise still_changing(claim.key)

    async def _set_if_free(self, claim: Claim, lease_ms: int) -> bool:
        """As `RedisClaims` does (see `_redis._set_if_free`): a `SET NX` whose answer does not
        come in time is withdrawn behind itself, on its own connection, which is then closed.
        A Cluster client sends it itself: there a timed-out claim expires with its lease."""
        if isinstance(self.client, RedisCluster):
            value = claim.in_progress_value
            return bool(await self.client.set(claim.key, value, nx=True, px=lease_ms))
        pool: Any = self.client.connection_pool
        connection = await _pooled_connection(pool)
        sent = False
        try:
            await connection.send_command(
                "SET", claim.key, claim.in_progress_value, "NX", "PX", lease_ms
            )
            sent = True
            reply = await connection.read_response(disconnect_on_error=False)
        except ResponseError:
            raise  # an answer: the connection is in step
        except BaseException:
            if sent:  # unsent (Redis down, a write cut short), there is nothing to withdraw
                await _withdraw(connection, claim)
            await connection.disconnect()
            raise
        finally:
            await pool.release(connection)
        return reply is not None

    async def complete(self, claim: Claim) -> bool:
        with translated("mark the claim done"):
            args: list[str | int] = [
                claim.in_progress_value,
                claim.done_value,
                self.options.retention_ms,
            ]
            return bool(await self._complete(keys=[claim.key], args=args))

    async def release(self, claim: Claim) -> bool:
        with translated("release the claim"):
            return bool(await self._release(keys=[claim.key], args=[claim.in_progress_value]))

    async def extend(self, claim: Claim, lease_seconds: float | None = None) -> bool:
        lease = claim.lease_seconds if lease_seconds is None else check_lease(lease_seconds)
        with translated("extend the claim"):
            args: list[str | int] = [claim.in_progress_value, milliseconds(lease)]
            return bool(await self._extend(keys=[claim.key], args=args))

    async def state(self, source: str, event_id: str) -> ClaimState | None:
        key = claim_key(self.options.prefix, source, event_id)
        with translated("read the claim"):
            found = parse_state(await self.client.get(key))
        return None if found is None else found[0]

    async def ping(self) -> None:
        with translated("reach Redis"):
            await self.client.ping()

    async def close(self) -> None:
        await self.client.aclose()

    @asynccontextmanager
    async def once(
        self, source: str, event_id: str, *, lease_seconds: float | None = None
    ) -> AsyncIterator[Claim]:
        """`async with claims.once(source, event_id):` as `RedisClaims.once`."""
        claim = await self.claim(source, event_id, lease_seconds=lease_seconds)
        try:
            yield claim
        except BaseException:
            try:
                await self.release(claim)
            except Exception as error:
                release_failed(claim, error)
            raise
        if not await self.complete(claim):
            warn_lost(claim)

    def idempotent(
        self, source: str, key: Callable[P, str], *, lease_seconds: float | None = None
    ) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Awaitable[R]]]:
        """Decorate a coroutine function to run once per `key(*args, **kwargs)`."""

        def decorate(function: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
            @functools.wraps(function)
            async def run_once(*args: P.args, **kwargs: P.kwargs) -> R:
                async with self.once(source, key(*args, **kwargs), lease_seconds=lease_seconds):
                    return await function(*args, **kwargs)

            return run_once

        return decorate
