"""The claim protocol on a real Redis: states, owners, leases, failures, and `once`."""

from __future__ import annotations

import socket
import time
from datetime import timedelta

import pytest
import redis

from hookinbox import ConfigurationError
from hookinbox.claims import (
    AlreadyDone,
    Claim,
    ClaimState,
    ClaimStoreUnavailable,
    InProgress,
    RedisClaims,
)
from hookinbox.claims._protocol import settle
from tests.claims.conftest import PrivateRedis


def test_a_claim_is_in_progress_for_its_lease_then_done_for_the_retention(
    claims: RedisClaims,
) -> None:
    claim = claims.claim("stripe", "evt_1", lease_seconds=30)
    assert claims.state("stripe", "evt_1") is ClaimState.IN_PROGRESS
    assert 29_000 < claims.client.pttl(claim.key) <= 30_000

    assert claims.complete(claim)
    assert claims.state("stripe", "evt_1") is ClaimState.DONE
    week = timedelta(days=7).total_seconds() * 1000
    assert week - 5_000 < claims.client.pttl(claim.key) <= week
    assert claims.complete(claim), "completing twice (a retried command) is still done"


def test_a_second_claim_sees_in_progress_then_done(claims: RedisClaims) -> None:
    first = claims.claim("stripe", "evt_1")
    with pytest.raises(InProgress, match="stripe/evt_1 is in progress"):
        claims.claim("stripe", "evt_1")
    claims.complete(first)
    with pytest.raises(AlreadyDone, match="stripe/evt_1 is done"):
        claims.claim("stripe", "evt_1")
    other = claims.claim("stripe", "evt_2")  # another key is free
    assert other.key != first.key


def test_sources_keep_their_own_keys(claims: RedisClaims) -> None:
    claims.complete(claims.claim("stripe", "1"))
    claims.claim("github", "1")
    assert claims.state("stripe", "1") is ClaimState.DONE
    assert claims.state("github", "1") is ClaimState.IN_PROGRESS


def test_release_deletes_the_key_so_the_next_claim_wins(claims: RedisClaims) -> None:
    claim = claims.claim("stripe", "evt_1")
    assert claims.release(claim)
    assert claims.state("stripe", "evt_1") is None
    assert claims.client.exists(claim.key) == 0, "no released mark is left behind"
    again = claims.claim("stripe", "evt_1")
    assert again.token != claim.token


def test_an_expired_lease_frees_the_key(claims: RedisClaims) -> None:
    claims.claim("stripe", "evt_1", lease_seconds=0.2)
    with pytest.raises(InProgress):
        claims.claim("stripe", "evt_1")
    time.sleep(0.3)
    claims.claim("stripe", "evt_1")


def test_a_stale_owner_cannot_release_complete_or_extend_a_newer_owners_claim(
    claims: RedisClaims,
) -> None:
    stale = claims.claim("stripe", "evt_1", lease_seconds=0.2)
    time.sleep(0.3)
    newer = claims.claim("stripe", "evt_1", lease_seconds=30)

    assert not claims.release(stale)
    assert not claims.extend(stale, 60)
    assert not claims.complete(stale)
    assert claims.client.get(newer.key) == newer.in_progress_value.encode()
    assert claims.client.pttl(newer.key) <= 30_000

    assert claims.complete(newer)
    assert not claims.release(stale)
    assert claims.client.get(newer.key) == newer.done_value.encode()


def test_completing_after_the_lease_ran_out_unclaimed_still_marks_done(
    claims: RedisClaims,
) -> None:
    claim = claims.claim("stripe", "evt_1", lease_seconds=0.1)
    time.sleep(0.2)
    assert claims.state("stripe", "evt_1") is None
    assert claims.complete(claim), "the work did happen: nobody else has the key"
    assert claims.state("stripe", "evt_1") is ClaimState.DONE


def test_extend_restarts_the_lease_of_the_owner(claims: RedisClaims) -> None:
    claim = claims.claim("stripe", "evt_1", lease_seconds=0.3)
    assert claims.extend(claim, 30)
    time.sleep(0.4)
    assert claims.state("stripe", "evt_1") is ClaimState.IN_PROGRESS
    assert claims.client.pttl(claim.key) > 29_000


def test_a_claim_whose_set_landed_before_its_reply_was_lost_is_still_ours(
    claims: RedisClaims,
) -> None:
    claim = claims.options.new_claim("stripe", "evt_1", None)
    assert settle(claim, claim.in_progress_value.encode())
    assert not settle(claim, None), "vanished between SET and GET: claim again"
    with pytest.raises(InProgress):
        settle(claim, b"progress:someone-else")
    with pytest.raises(AlreadyDone):
        settle(claim, claim.done_value)


def test_once_runs_the_block_and_marks_it_done(claims: RedisClaims) -> None:
    ran = []
    with claims.once("search", "doc-1") as claim:
        ran.append(claim.key)
        assert claims.state("search", "doc-1") is ClaimState.IN_PROGRESS
    assert claims.state("search", "doc-1") is ClaimState.DONE
    with pytest.raises(AlreadyDone), claims.once("search", "doc-1"):
        ran.append("again")
    assert len(ran) == 1


def test_once_releases_on_failure_so_a_retry_runs(claims: RedisClaims) -> None:
    with pytest.raises(ZeroDivisionError), claims.once("search", "doc-1"):
        _ = 1 / 0
    assert claims.state("search", "doc-1") is None
    with claims.once("search", "doc-1"):
        pass
    assert claims.state("search", "doc-1") is ClaimState.DONE


def test_once_refuses_while_another_holder_works(claims: RedisClaims) -> None:
    holder = claims.claim("search", "doc-1")
    with pytest.raises(InProgress), claims.once("search", "doc-1"):
        pytest.fail("the block must not run")
    assert claims.client.get(holder.key) == holder.in_progress_value.encode()


def test_once_warns_when_its_lease_ran_out_and_another_holder_took_over(
    claims: RedisClaims, caplog: pytest.LogCaptureFixture
) -> None:
    with claims.once("search", "doc-1", lease_seconds=0.1):
        time.sleep(0.2)
        newer = claims.claim("search", "doc-1")
    assert "lease ran out" in caplog.text
    assert claims.client.get(newer.key) == newer.in_progress_value.encode()


def test_idempotent_runs_a_function_once_per_key(claims: RedisClaims) -> None:
    calls: list[str] = []

    @claims.idempotent("mail", key=lambda order_id, to: f"receipt-{order_id}")
    def send_receipt(order_id: int, to: str) -> str:
        calls.append(to)
        return f"sent to {to}"

    assert send_receipt(7, "a@example.com") == "sent to a@example.com"
    with pytest.raises(AlreadyDone):
        send_receipt(7, "b@example.com")
    assert send_receipt(8, "c@example.com") == "sent to c@example.com"
    assert calls == ["a@example.com", "c@example.com"]


@pytest.mark.parametrize(
    ("source", "event_id", "error"),
    [
        ("", "evt", "source is a name"),
        ("a/b", "evt", "may not contain '/'"),
        ("{hot}", "evt", "hash tag"),
        ("x" * 65, "evt", "source is a name"),
        ("stripe", "", "event id is 1 to"),
        ("stripe", "e" * 1025, "event id is 1 to"),
    ],
)
def test_bad_keys_are_refused_before_redis_is_asked(
    claims: RedisClaims, source: str, event_id: str, error: str
) -> None:
    with pytest.raises((ValueError, ConfigurationError), match=error):
        claims.claim(source, event_id)


def test_bad_options_are_refused(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    with pytest.raises(ConfigurationError, match="hash tag"):
        RedisClaims(client, prefix="{app}")
    with pytest.raises(ConfigurationError, match="may not be empty"):
        RedisClaims(client, prefix="")
    with pytest.raises(ConfigurationError, match=r"lease is 0\.01 s"):
        RedisClaims(client, lease_seconds=0)
    with pytest.raises(ConfigurationError, match="at least one second"):
        RedisClaims(client, retention=timedelta(0))
    client.close()


def test_a_foreign_value_under_the_prefix_is_a_configuration_error(
    claims: RedisClaims, prefix: str
) -> None:
    claims.client.set(f"{prefix}:stripe/evt_1", "something else")
    with pytest.raises(ConfigurationError, match="prefix no other data uses"):
        claims.claim("stripe", "evt_1")


def test_redis_down_raises_and_runs_nothing(closed_port: int) -> None:
    claims = RedisClaims.from_url(f"redis://127.0.0.1:{closed_port}/0", timeout=0.5)
    ran = []
    with pytest.raises(ClaimStoreUnavailable, match="could not claim: Redis is unreachable"):
        with claims.once("stripe", "evt_1"):
            ran.append(1)
    assert ran == []
    with pytest.raises(ClaimStoreUnavailable):
        claims.ping()
    claim = Claim("stripe", "evt_1", "k", "t", 1.0)
    for call in (claims.complete, claims.release, claims.extend):
        with pytest.raises(ClaimStoreUnavailable):
            call(claim)


def test_redis_gone_before_done_raises_at_the_end_of_the_block(
    private_redis: PrivateRedis,
) -> None:
    claims = RedisClaims.from_url(private_redis.url, timeout=0.5)
    with pytest.raises(ClaimStoreUnavailable, match="could not mark the claim done"):
        with claims.once("stripe", "evt_1"):
            private_redis.stop()


def test_redis_gone_before_release_keeps_the_original_error(
    private_redis: PrivateRedis, caplog: pytest.LogCaptureFixture
) -> None:
    claims = RedisClaims.from_url(private_redis.url, timeout=0.5)
    with pytest.raises(KeyError), claims.once("stripe", "evt_1"):
        private_redis.stop()
        raise KeyError("the work failed")
    assert "could not release the claim" in caplog.text
    assert "expires after its 60 s lease" in caplog.text


def test_a_hung_redis_is_unavailable_after_the_timeout() -> None:
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        port = silent.getsockname()[1]
        claims = RedisClaims.from_url(f"redis://127.0.0.1:{port}/0", timeout=0.3)
        started = time.monotonic()
        with pytest.raises(ClaimStoreUnavailable, match="Redis is unreachable: TimeoutError"):
            claims.claim("stripe", "evt_1")
        assert time.monotonic() - started < 2, "a hung Redis must not hold the request"
