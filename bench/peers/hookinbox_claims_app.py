"""hookinbox in Redis claim mode as the claims benchmark serves it: no SQL database, one Stripe
source, inline, and a handler that does nothing, so the endpoint's cost is its deduplication.

`BENCH_REDIS_URL` names the Redis, `BENCH_CLAIMS_PREFIX` the key prefix of this run.
"""

from __future__ import annotations

import os
from datetime import timedelta

from bench._common import SECRET
from hookinbox import Event
from hookinbox.claims import ClaimContext, ClaimInbox, RedisClaims
from hookinbox.sources import Stripe

claims = RedisClaims.from_url(
    os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"),
    prefix=os.environ.get("BENCH_CLAIMS_PREFIX", "bench-claims"),
    retention=timedelta(days=30),  # Stripe's redelivery window
)
inbox = ClaimInbox(claims)
inbox.add_source(Stripe(secret=SECRET))


@inbox.handler("stripe", "checkout.session.completed")
def nothing(event: Event, ctx: ClaimContext) -> None:
    pass
