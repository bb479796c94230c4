"""The Redis-claims app that process tests serve: no SQL database, one Stripe source, inline.

Its handler counts each run of its body and records each finished effect in Redis, where the
test and every server process can see them:

    {prefix}:runs:{event_id}   INCR at the start of each run of the body
    {prefix}:effects           RPUSH "{event_id} {pid}" at its end
    {prefix}:started           RPUSH event_id before a "hang_first" event hangs on its first run

Configured by the environment: CLAIMS_REDIS_URL, CLAIMS_PREFIX, CLAIMS_LEASE (seconds).
"""

from __future__ import annotations

import os
import time
from datetime import timedelta

from hookinbox import Event
from hookinbox.claims import ClaimContext, ClaimInbox, RedisClaims
from hookinbox.sources import Stripe

STRIPE_SECRET = "whsec_test_claims_app"
PREFIX = os.environ.get("CLAIMS_PREFIX", "hookinbox-test-claims-app")

claims = RedisClaims.from_url(
    os.environ.get("CLAIMS_REDIS_URL", "redis://127.0.0.1:6379/0"),
    prefix=PREFIX,
    lease_seconds=float(os.environ.get("CLAIMS_LEASE", "60")),
    retention=timedelta(days=30),
)
inbox = ClaimInbox(claims)
inbox.add_source(Stripe(secret=STRIPE_SECRET))


def effects_key(prefix: str) -> str:
    return f"{prefix}:effects"


def runs_key(prefix: str, event_id: str) -> str:
    return f"{prefix}:runs:{event_id}"


def started_key(prefix: str) -> str:
    return f"{prefix}:started"


@inbox.handler("stripe", "checkout.session.completed")
def record(event: Event, ctx: ClaimContext) -> None:
    redis = claims.client
    run = int(redis.incr(runs_key(PREFIX, event.id)))  # type: ignore[arg-type]
    if event.payload["data"]["object"].get("hang_first") and run == 1:
        redis.rpush(started_key(PREFIX), event.id)
        time.sleep(3600)  # until the test kills this process
    time.sleep(0.002)  # a handler that takes a moment: a window for a concurrent copy
    redis.rpush(effects_key(PREFIX), f"{event.id} {os.getpid()}")
