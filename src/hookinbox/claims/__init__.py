"""Redis claims: run work once per key where the work's effects live outside any SQL database.

    claims = RedisClaims.from_url("redis://127.0.0.1:6379/0")
    with claims.once("stripe", event_id):
        search_index.put(document)

or, with no SQL database at all, as the deduplication of an inbox whose handlers run inline:
`ClaimInbox(claims)`. Needs redis-py: `pip install 'hookinbox[redis]'`. The guarantees are
weaker than the SQL path's; docs/redis-claims.md states them.
"""

from hookinbox._extras import importing

with importing("hookinbox.claims", "redis"):  # redis-py: the [redis] extra
    import redis  # noqa: F401

from hookinbox._errors import AlreadyDone, ClaimStoreUnavailable, ClaimTaken, InProgress
from hookinbox.claims._async import AsyncRedisClaims
from hookinbox.claims._inbox import ClaimInbox
from hookinbox.claims._protocol import Claim, ClaimState
from hookinbox.claims._receiver import ClaimContext
from hookinbox.claims._redis import RedisClaims

__all__ = [
    "AlreadyDone",
    "AsyncRedisClaims",
    "Claim",
    "ClaimContext",
    "ClaimInbox",
    "ClaimState",
    "ClaimStoreUnavailable",
    "ClaimTaken",
    "InProgress",
    "RedisClaims",
]
