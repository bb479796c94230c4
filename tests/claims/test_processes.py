"""Redis claim mode across real server processes: concurrent copies, and a SIGKILL mid-handler.

Each test serves `tests.apps.claims_app:inbox` with `hookinbox serve` (no SQL database, no
worker) in processes of its own, and reads what the handler did from Redis (see the app).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import redis

from hookinbox.claims import ClaimState, RedisClaims
from tests.apps.claims_app import STRIPE_SECRET, effects_key, runs_key, started_key
from tests.support.server import free_port, hookinbox_command, serving_process
from tests.support.signing import stripe_delivery, stripe_event

EVENTS = 500
COPIES = 3
IN_FLIGHT = 16
"""Events whose copies are in flight at once."""


@dataclass
class Served:
    process: subprocess.Popen[str]
    url: str


@contextmanager
def claim_server(redis_url: str, prefix: str, lease: float = 60) -> Iterator[Served]:
    port = free_port()
    env = {"CLAIMS_REDIS_URL": redis_url, "CLAIMS_PREFIX": prefix, "CLAIMS_LEASE": str(lease),
           "HOOKINBOX_DATABASE_URL": ""}  # fmt: skip  # a claims inbox refuses a database URL
    command = hookinbox_command(
        "serve", "tests.apps.claims_app:inbox", "--port", str(port), "--log-level", "warning"
    )
    with serving_process(command, port, env=env) as (process, url):
        yield Served(process, url)


def signed(event_id: str, **data: Any) -> tuple[dict[str, str], bytes]:
    return stripe_delivery(stripe_event(event_id, **data), STRIPE_SECRET)


async def deliver_like_a_provider(
    client: httpx.AsyncClient, url: str, event_id: str, answers: Counter[str]
) -> None:
    """Send one copy; on 409 (another copy's handler runs) try again shortly, until 200."""
    headers, body = signed(event_id)
    for _ in range(400):
        response = await client.post(f"{url}/webhooks/stripe", headers=headers, content=body)
        answers[f"{response.status_code} {response.json()['status']}"] += 1
        if response.status_code == 200:
            return
        assert response.status_code == 409, f"{event_id}: {response.status_code} {response.text}"
        await asyncio.sleep(0.05)
    raise AssertionError(f"{event_id} was still in progress after 400 tries")


async def deliver_all(urls: list[str], event_ids: list[str]) -> Counter[str]:
    """Every event's copies at once, alternating between the servers."""
    answers: Counter[str] = Counter()
    gate = asyncio.Semaphore(IN_FLIGHT)
    limits = httpx.Limits(max_connections=IN_FLIGHT * COPIES)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:

        async def one_event(number: int, event_id: str) -> None:
            async with gate:
                await asyncio.gather(
                    *(
                        deliver_like_a_provider(client, urls[(number + c) % 2], event_id, answers)
                        for c in range(COPIES)
                    )
                )

        await asyncio.gather(*(one_event(n, e) for n, e in enumerate(event_ids)))
    return answers


def test_concurrent_copies_over_two_processes_run_each_handler_body_once(
    redis_url: str, prefix: str
) -> None:
    event_ids = [f"evt_{n}" for n in range(EVENTS)]
    with claim_server(redis_url, prefix) as first, claim_server(redis_url, prefix) as second:
        started = time.monotonic()
        answers = asyncio.run(deliver_all([first.url, second.url], event_ids))
        elapsed = time.monotonic() - started
        server_pids = {first.process.pid, second.process.pid}

    print(f"\n{EVENTS} events x {COPIES} copies over 2 processes in {elapsed:.1f} s: {answers}")
    assert answers["200 accepted"] == EVENTS
    assert answers["200 duplicate"] == EVENTS * (COPIES - 1)
    assert set(answers) <= {"200 accepted", "200 duplicate", "409 in_progress"}

    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        effects = [line.split() for line in client.lrange(effects_key(prefix), 0, -1)]
        runs = client.mget([runs_key(prefix, event_id) for event_id in event_ids])
    finally:
        client.close()
    applied = Counter(event_id for event_id, _ in effects)
    doubled = sorted(e for e, n in applied.items() if n > 1)
    assert not doubled, f"applied more than once: {doubled[:10]} ({len(doubled)} events)"
    assert set(applied) == set(event_ids)
    assert runs == ["1"] * EVENTS, "a handler body started more than once"
    pids = {int(pid) for _, pid in effects}
    assert pids == server_pids, f"handlers ran in {pids}, servers were {server_pids}"

    claims = RedisClaims.from_url(redis_url, prefix=prefix)
    states = {claims.state("stripe", event_id) for event_id in event_ids}
    claims.close()
    assert states == {ClaimState.DONE}


def test_a_handler_killed_mid_run_leaves_a_claim_that_expires_after_its_lease(
    redis_url: str, prefix: str
) -> None:
    lease = 3.0
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    claims = RedisClaims.from_url(redis_url, prefix=prefix)
    headers, body = signed("evt_hang", hang_first=True)
    lost: list[BaseException] = []

    def first_delivery(url: str) -> None:
        try:
            httpx.post(f"{url}/webhooks/stripe", headers=headers, content=body, timeout=60)
        except httpx.TransportError as error:  # the server dies under it
            lost.append(error)

    try:
        with (
            claim_server(redis_url, prefix, lease) as doomed,
            claim_server(redis_url, prefix, lease) as survivor,
        ):
            thread = threading.Thread(target=first_delivery, args=(doomed.url,))
            thread.start()
            deadline = time.monotonic() + 20
            while client.lrange(started_key(prefix), 0, -1) != ["evt_hang"]:
                assert time.monotonic() < deadline, "the handler never started"
                time.sleep(0.02)
            os.kill(doomed.process.pid, signal.SIGKILL)
            killed_at = time.monotonic()
            assert doomed.process.wait(timeout=10) == -signal.SIGKILL
            thread.join(10)
            assert lost, "the first delivery must not have been answered"

            retry_url = f"{survivor.url}/webhooks/stripe"
            early = httpx.post(retry_url, headers=headers, content=body)
            assert early.status_code == 409, "the dead holder's lease still runs"
            assert claims.state("stripe", "evt_hang") is ClaimState.IN_PROGRESS

            while claims.state("stripe", "evt_hang") is ClaimState.IN_PROGRESS:
                assert time.monotonic() - killed_at < lease + 5, "the claim never expired"
                time.sleep(0.05)
            assert time.monotonic() - killed_at > lease - 1.5, "expired long before its lease"

            retry = httpx.post(retry_url, headers=headers, content=body)
            assert (retry.status_code, retry.json()["status"]) == (200, "accepted")
            assert client.get(runs_key(prefix, "evt_hang")) == "2"
            assert client.lrange(effects_key(prefix), 0, -1) == [f"evt_hang {survivor.process.pid}"]
            assert claims.state("stripe", "evt_hang") is ClaimState.DONE
            again = httpx.post(retry_url, headers=headers, content=body)
            assert again.json()["status"] == "duplicate"
    finally:
        client.close()
        claims.close()
