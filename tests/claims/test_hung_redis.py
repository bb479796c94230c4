"""A hung Redis (SIGSTOP) leaves no claim behind: the provider's retry is accepted at once.

What it proves, on a redis-server of the test's own (never the shared one), frozen with
SIGSTOP while a claim is being taken over a warm connection, then thawed with SIGCONT:
- the claim fails with `ClaimStoreUnavailable` after the client's timeout, and once Redis
  runs again the key is free (not `progress:<token>` for the whole lease), so the next claim
  wins at once;
- served by `hookinbox serve` (claim mode), the delivery sent while Redis is frozen is answered
  503 `unavailable`, and the same delivery sent again after the thaw is answered 200
  `accepted` and its handler runs once.
Before, the timed-out `SET NX` waited in the socket, ran when Redis woke up, and held the key
for the lease (60 s): every retry in that time was answered 409 `in_progress`.
"""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
import redis

from hookinbox.claims import AsyncRedisClaims, ClaimState, ClaimStoreUnavailable, RedisClaims
from tests.apps.claims_app import effects_key
from tests.claims.conftest import PrivateRedis
from tests.claims.test_processes import claim_server, signed
from tests.reliability._report import Trial, record

pytestmark = pytest.mark.redis

TIMEOUT = 0.5
"""The claim's command timeout in the in-process test (the served app keeps its 2 s)."""


@contextmanager
def frozen(server: PrivateRedis) -> Iterator[None]:
    """Redis stopped (SIGSTOP) inside the block, running again (SIGCONT) after it."""
    os.kill(server.process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(server.process.pid, signal.SIGCONT)


def test_a_claim_timed_out_on_a_hung_redis_is_withdrawn(private_redis: PrivateRedis) -> None:
    prefix = f"hung-{uuid.uuid4().hex[:8]}"
    claims = RedisClaims.from_url(private_redis.url, prefix=prefix, timeout=TIMEOUT)
    try:
        claims.ping()  # a warm connection in the pool: the SET goes out on it at once
        with frozen(private_redis), pytest.raises(ClaimStoreUnavailable) as refused:
            claims.claim("stripe", "evt_hung")
        assert "Redis is unreachable: TimeoutError" in str(refused.value)
        # After the thaw Redis runs the late SET, then the release queued behind it.
        assert claims.state("stripe", "evt_hung") is None
        claim = claims.claim("stripe", "evt_hung")  # the retry wins at once
        assert claims.state("stripe", "evt_hung") is ClaimState.IN_PROGRESS
        assert claims.complete(claim)
    finally:
        claims.close()


def test_a_claim_on_a_redis_that_is_down_withdraws_nothing(
    closed_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing was sent: no second connection attempt, no warning on every delivery."""
    claims = RedisClaims.from_url(f"redis://127.0.0.1:{closed_port}/0", timeout=TIMEOUT)
    try:
        with pytest.raises(ClaimStoreUnavailable):
            claims.claim("stripe", "evt_down")
    finally:
        claims.close()
    assert "withdraw" not in caplog.text


def test_an_async_claim_timed_out_on_a_hung_redis_is_withdrawn(
    private_redis: PrivateRedis,
) -> None:
    prefix = f"hung-async-{uuid.uuid4().hex[:8]}"

    async def scenario() -> ClaimState | None:
        claims = AsyncRedisClaims.from_url(private_redis.url, prefix=prefix, timeout=TIMEOUT)
        try:
            await claims.ping()  # a warm connection
            with frozen(private_redis), pytest.raises(ClaimStoreUnavailable):
                await claims.claim("stripe", "evt_hung")
            state = await claims.state("stripe", "evt_hung")
            await claims.complete(await claims.claim("stripe", "evt_hung"))
            return state
        finally:
            await claims.close()

    assert asyncio.run(scenario()) is None


def test_a_retry_after_a_hung_redis_is_accepted(private_redis: PrivateRedis) -> None:
    prefix = f"hung-served-{uuid.uuid4().hex[:8]}"
    reader = redis.Redis.from_url(private_redis.url)
    with claim_server(private_redis.url, prefix) as served, httpx.Client(timeout=30) as client:
        url = f"{served.url}/webhooks/stripe"
        headers, body = signed("evt_warm")
        assert client.post(url, content=body, headers=headers).status_code == 200  # warm pool
        headers, body = signed("evt_hung")
        with frozen(private_redis):
            during = client.post(url, content=body, headers=headers)
        retry = client.post(url, content=body, headers=headers)
        effects = [item.decode() for item in reader.lrange(effects_key(prefix), 0, -1)]
    reader.close()
    assert (during.status_code, during.json()["error"]) == (503, "unavailable")
    assert (retry.status_code, retry.json()["status"]) == (200, "accepted")
    assert [effect.split()[0] for effect in effects] == ["evt_warm", "evt_hung"]
    record(
        Trial(
            fault="Redis frozen (SIGSTOP) during a claim, then thawed (claim mode, served)",
            backend="-",
            deliveries=3,
            detail=f"during: {during.status_code} unavailable; the retry after SIGCONT: "
            f"{retry.status_code} {retry.json()['status']} (before: 409 in_progress for the "
            "60 s lease); handler ran once",
        )
    )
