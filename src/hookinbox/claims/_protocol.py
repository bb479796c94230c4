"""The claim protocol, independent of the Redis client: keys, values, scripts and states.

One key per claim, `{prefix}:{source}/{event_id}`, and a value that says where the work is:

    (no key)            never claimed, or released after a failure: the next claim wins
    progress:<token>    claimed by the holder of <token>; expires after the lease
    done:<token>        the work is done; expires after the retention

A claim is `SET key progress:<token> NX PX <lease>`: atomic, so of any number of concurrent
claimants exactly one gets the key. Completing, releasing and extending are compare-and-set
scripts that act only while the value is still the caller's own, so a holder whose lease ran
out can never undo a newer holder's claim. A failure deletes the key rather than leaving a
"released" value: a mark of a try that did not finish would make the provider's retry look
like a duplicate (seed 000), and the next `SET NX` must win outright.

Every command names one key, so the protocol works on Redis Cluster as on a single server;
the prefix and the source may not contain `{` or `}`, which would pin every claim to one slot.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from hookinbox._errors import AlreadyDone, ClaimTaken, ConfigurationError, InProgress

DEFAULT_PREFIX = "hookinbox:claim"
DEFAULT_LEASE_SECONDS = 60.0
DEFAULT_CLAIM_RETENTION = timedelta(days=7)
MAX_SOURCE_LENGTH = 64
MAX_EVENT_ID_LENGTH = 1024
CLAIM_ATTEMPTS = 3
"""`SET NX` then `GET` can race a release in between; after this many rounds, `InProgress`."""

_PROGRESS = "progress:"
_DONE = "done:"

# KEYS[1] the claim; ARGV[1] our in-progress value, ARGV[2] our done value, ARGV[3] retention
# in ms. Done when the key is ours, or gone (our lease ran out and nobody claimed it since: the
# work did happen). Already our done value: a retried call after a lost reply.
COMPLETE_SCRIPT = """
local current = redis.call('GET', KEYS[1])
if current == ARGV[2] then return 1 end
if current == ARGV[1] or not current then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
"""

# KEYS[1] the claim; ARGV[1] our in-progress value. Compare-and-delete.
RELEASE_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

# KEYS[1] the claim; ARGV[1] our in-progress value, ARGV[2] the new lease in ms.
EXTEND_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""


class ClaimState(StrEnum):
    """What a claim key holds; a released or never-claimed key has no state (None)."""

    IN_PROGRESS = "in_progress"
    DONE = "done"


@dataclass(frozen=True, slots=True)
class Claim:
    """A claim this process holds: pass it back to complete, release or extend it."""

    source: str
    event_id: str
    key: str
    token: str
    """Random, one per claim: the owner check of every later command."""
    lease_seconds: float

    @property
    def in_progress_value(self) -> str:
        return _PROGRESS + self.token

    @property
    def done_value(self) -> str:
        return _DONE + self.token


def _check_no_braces(what: str, value: str) -> None:
    if "{" in value or "}" in value:
        raise ConfigurationError(
            f"{what} {value!r} contains '{{' or '}}': on Redis Cluster that would be a hash "
            "tag putting every claim in one slot"
        )


@dataclass(frozen=True, slots=True)
class ClaimOptions:
    """How claims are kept: the key prefix, the lease of work in progress, the retention."""

    prefix: str = DEFAULT_PREFIX
    lease_seconds: float = DEFAULT_LEASE_SECONDS
    """How long a claim in progress holds without being completed, released or extended.
    Longer than the longest run of the work: a holder still working past it loses the claim
    to the next claimant. Shorter means a retry after a crash waits less."""
    retention: timedelta = DEFAULT_CLAIM_RETENTION
    """How long a done claim keeps deduplicating."""

    def __post_init__(self) -> None:
        if not self.prefix:
            raise ConfigurationError("the claim key prefix may not be empty")
        _check_no_braces("the claim key prefix", self.prefix)
        check_lease(self.lease_seconds)
        if self.retention < timedelta(seconds=1):
            raise ConfigurationError("the claim retention must be at least one second")

    def new_claim(self, source: str, event_id: str, lease_seconds: float | None) -> Claim:
        lease = self.lease_seconds if lease_seconds is None else check_lease(lease_seconds)
        return Claim(
            source=source,
            event_id=event_id,
            key=claim_key(self.prefix, source, event_id),
            token=secrets.token_hex(12),
            lease_seconds=lease,
        )

    @property
    def retention_ms(self) -> int:
        return milliseconds(self.retention.total_seconds())


def check_lease(seconds: float) -> float:
    if not 0.01 <= seconds <= 86400:
        raise ConfigurationError(f"a claim lease is 0.01 s to one day, not {seconds!r}")
    return seconds


def milliseconds(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def check_source(source: str) -> None:
    """Refuse a source name that cannot start a claim key."""
    if not isinstance(source, str) or not source or len(source) > MAX_SOURCE_LENGTH:
        raise ValueError(f"a claim's source is a name of 1 to {MAX_SOURCE_LENGTH} characters")
    if "/" in source:
        raise ValueError(f"a claim's source may not contain '/': {source!r}")
    _check_no_braces("the source", source)


def claim_key(prefix: str, source: str, event_id: str) -> str:
    """`{prefix}:{source}/{event_id}`: a source has no `/`, so no two pairs share a key."""
    check_source(source)
    if not isinstance(event_id, str) or not event_id or len(event_id) > MAX_EVENT_ID_LENGTH:
        raise ValueError(f"a claim's event id is 1 to {MAX_EVENT_ID_LENGTH} characters")
    return f"{prefix}:{source}/{event_id}"


def parse_state(raw: bytes | str | None) -> tuple[ClaimState, str] | None:
    """(state, owner token) of a stored value; None for no key."""
    if raw is None:
        return None
    value = raw.decode() if isinstance(raw, bytes) else raw
    if value.startswith(_DONE):
        return ClaimState.DONE, value[len(_DONE) :]
    if value.startswith(_PROGRESS):
        return ClaimState.IN_PROGRESS, value[len(_PROGRESS) :]
    raise ConfigurationError(
        f"a key under the claim prefix holds {value[:40]!r}, not a claim: give the claims a "
        "prefix no other data uses"
    )


def settle(claim: Claim, current: bytes | str | None) -> bool:
    """After `SET NX` failed: True if the key is ours after all, False if it vanished since.

    Ours: redis-py retried a `SET` whose reply was lost, and the first one had landed.
    Anyone else's: `AlreadyDone` or `InProgress`, naming the key.
    """
    found = parse_state(current)
    if found is None:
        return False
    state, token = found
    # Constant time, like every token comparison (tests/reliability checks the source tree).
    if state is ClaimState.IN_PROGRESS and hmac.compare_digest(
        token.encode(), claim.token.encode()
    ):
        return True
    raise taken(claim.key, state)


def taken(key: str, state: ClaimState) -> ClaimTaken:
    if state is ClaimState.DONE:
        return AlreadyDone(f"{key} is done already")
    return InProgress(f"{key} is in progress elsewhere; try again later")


def still_changing(key: str) -> InProgress:
    return InProgress(f"{key} changed hands {CLAIM_ATTEMPTS} times while claiming; try again later")
