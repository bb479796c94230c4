"""The asyncio store speaks the same protocol; both stores work on a real Redis Cluster."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis

from hookinbox.claims import (
    AlreadyDone,
    AsyncRedisClaims,
    ClaimState,
    ClaimStoreUnavailable,
    InProgress,
    RedisClaims,
)


def test_async_claims_follow_the_protocol(redis_url: str, prefix: str) -> None:
    async def scenario() -> None:
        claims = AsyncRedisClaims.from_url(redis_url, prefix=prefix)
        try:
            claim = await claims.claim("stripe", "evt_1")
            with pytest.raises(InProgress):
                await claims.claim("stripe", "evt_1")
            assert await claims.extend(claim, 30)
            assert await claims.complete(claim)
            assert await claims.state("stripe", "evt_1") is ClaimState.DONE
            with pytest.raises(AlreadyDone):
                await claims.claim("stripe", "evt_1")

            stale = await claims.claim("stripe", "evt_2", lease_seconds=0.1)
            await asyncio.sleep(0.2)
            newer = await claims.claim("stripe", "evt_2")
            assert not await claims.release(stale)
            assert await claims.state("stripe", "evt_2") is ClaimState.IN_PROGRESS
            assert await claims.release(newer)
            assert await claims.state("stripe", "evt_2") is None
        finally:
            await claims.close()

    asyncio.run(scenario())


def test_async_once_and_idempotent(redis_url: str, prefix: str) -> None:
    effects: list[str] = []

    async def scenario() -> None:
        claims = AsyncRedisClaims.from_url(redis_url, prefix=prefix)

        @claims.idempotent("search", key=lambda doc_id: doc_id)
        async def index(doc_id: str) -> str:
            effects.append(doc_id)
            return doc_id.upper()

        try:
            with pytest.raises(RuntimeError):
                async with claims.once("search", "doc-1"):
                    raise RuntimeError("index unavailable")
            assert await claims.state("search", "doc-1") is None, "released for the retry"
            assert await index("doc-1") == "DOC-1"
            with pytest.raises(AlreadyDone):
                await index("doc-1")
            concurrent = await asyncio.gather(
                *(index("doc-2") for _ in range(5)), return_exceptions=True
            )
            assert concurrent.count("DOC-2") == 1
            assert all(isinstance(r, InProgress | AlreadyDone) for r in concurrent if r != "DOC-2")
        finally:
            await claims.close()

    asyncio.run(scenario())
    assert effects == ["doc-1", "doc-2"]


def test_sync_and_async_stores_share_one_prefix(redis_url: str, prefix: str) -> None:
    claims = RedisClaims.from_url(redis_url, prefix=prefix)

    async def claim_async() -> None:
        async_claims = AsyncRedisClaims.from_url(redis_url, prefix=prefix)
        await async_claims.claim("stripe", "evt_1")
        await async_claims.close()

    asyncio.run(claim_async())
    with pytest.raises(InProgress):
        claims.claim("stripe", "evt_1")
    claims.close()


def test_async_redis_down_raises(closed_port: int) -> None:
    async def scenario() -> None:
        claims = AsyncRedisClaims.from_url(f"redis://127.0.0.1:{closed_port}/0", timeout=0.5)
        try:
            with pytest.raises(ClaimStoreUnavailable, match="Redis is unreachable"):
                async with claims.once("stripe", "evt_1"):
                    pytest.fail("the block must not run")
        finally:
            await claims.close()

    asyncio.run(scenario())


def test_claims_on_a_redis_cluster_spread_over_its_nodes(redis_cluster: str) -> None:
    claims = RedisClaims.from_url(redis_cluster, cluster=True, prefix="cluster-test")
    ids = [f"evt_{n}" for n in range(60)]
    held = [claims.claim("stripe", event_id, lease_seconds=0.3) for event_id in ids]
    for claim in held[:20]:
        assert claims.complete(claim)
    for claim in held[20:40]:
        assert claims.release(claim)
    time.sleep(0.4)  # the last 20 leases run out
    late = [claims.claim("stripe", event_id) for event_id in ids[40:]]
    assert not claims.release(held[40]), "a stale owner cannot delete a newer claim"

    states = [claims.state("stripe", event_id) for event_id in ids]
    assert states == [ClaimState.DONE] * 20 + [None] * 20 + [ClaimState.IN_PROGRESS] * 20
    with pytest.raises(AlreadyDone):
        claims.claim("stripe", "evt_0")

    keys_per_node = []
    for node in claims.client.get_primaries():  # type: ignore[union-attr]
        client = redis.Redis(host=node.host, port=node.port)
        keys_per_node.append(len(list(client.scan_iter(match="cluster-test:*"))))
        client.close()
    assert sum(keys_per_node) == 40
    assert len([n for n in keys_per_node if n]) == 3, f"claims not spread: {keys_per_node}"
    for claim in late:
        claims.release(claim)
    claims.close()


def test_async_claims_on_a_redis_cluster(redis_cluster: str) -> None:
    async def scenario() -> None:
        claims = AsyncRedisClaims.from_url(redis_cluster, cluster=True, prefix="cluster-async")
        try:
            for n in range(10):
                async with claims.once("github", f"delivery-{n}"):
                    pass
            assert {await claims.state("github", f"delivery-{n}") for n in range(10)} == {
                ClaimState.DONE
            }
        finally:
            await claims.close()

    asyncio.run(scenario())
