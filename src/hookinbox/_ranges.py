"""The range of every number a setting takes: one table, checked by the command line's options
(`cli/_types.py`) and by the Python constructors (`WorkerOptions`, `StoreOptions`, `Inbox`,
`RetryPolicy`, ...) alike.

A leaf: it imports only the exception tree, so that `hookinbox --help` shows the ranges without
importing storage. Every range is finite at both ends, so `nan` (which compares false with
everything, and so passed `low <= value <= high` written the other way round), `inf` and
`-inf` are outside all of them; and no number of seconds reaches what `time.sleep`,
`threading.Event.wait` (`threading.TIMEOUT_MAX`, about 9.2e9 s on Linux) or a deadline in
the calendar (`datetime + timedelta`) would overflow on: the longest is a year.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hookinbox._errors import ConfigurationError

MINUTE = 60.0
HOUR = 3600.0
DAY = 86_400.0
YEAR = 366 * DAY


@dataclass(frozen=True, slots=True)
class Range:
    """The numbers a setting takes: from `low` to `high`, both finite."""

    low: float
    high: float
    whole: bool = False
    """Whole numbers only (an `int`: a float such as 4.0 is refused, as is a bool)."""
    seconds: bool = False
    """A length of time, in seconds (said in the error)."""
    low_open: bool = False
    """`low` itself is outside (a timeout of 0 would refuse everything)."""
    high_open: bool = False

    def __contains__(self, value: object) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.whole and not isinstance(value, int):
            return False
        if isinstance(value, float) and not math.isfinite(value):
            return False
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    def describe(self) -> str:
        """`between 0.5 and 86400 seconds`, `more than 0 and at most 300 seconds`, `a whole
        number from 1 to 256`, `a number at least 0 and less than 1`."""
        low, high = _shown(self.low), _shown(self.high)
        if self.whole:
            return f"a whole number from {low} to {high}"
        unit = " seconds" if self.seconds else ""
        kind = "" if self.seconds else "a number "
        if self.low_open or self.high_open:
            above = f"more than {low}" if self.low_open else f"at least {low}"
            below = f"less than {high}" if self.high_open else f"at most {high}"
            return f"{kind}{above} and {below}{unit}"
        return f"{kind}between {low} and {high}{unit}"

    def check(self, name: str, value: object, *, unless: str = "") -> None:
        """Raise `ConfigurationError` naming `name` unless `value` is in the range.

        `unless`: the other values the setting takes, said in the error (`or None`)."""
        if value not in self:
            alternative = f" {unless}" if unless else ""
            raise ConfigurationError(
                f"{name} must be {self.describe()}{alternative}, not {value!r}"
            )

    def check_optional(self, name: str, value: object) -> None:
        """As `check`, with None allowed (the setting's default is then chosen elsewhere)."""
        if value is not None:
            self.check(name, value, unless="(or None)")


def _shown(bound: float) -> str:
    """86400, not 86400.0 nor 8.64e+04; 0.05 as itself."""
    return str(int(bound)) if bound == int(bound) else repr(bound)


def seconds(low: float, high: float, *, low_open: bool = False) -> Range:
    return Range(low, high, seconds=True, low_open=low_open)


def whole(low: int, high: int) -> Range:
    return Range(low, high, whole=True)


# -- the worker and the relay (WorkerOptions; `hookinbox worker`, `relay`, serve's worker) --

CONCURRENCY = whole(1, 256)
AUTO_PAUSE_AFTER = whole(1, 1_000_000)
LEASE_SECONDS = seconds(0.5, DAY)
GRACE_PERIOD = seconds(0, HOUR)
HEARTBEAT_INTERVAL = seconds(0.05, HOUR)
POLL_INTERVAL = seconds(0.01, HOUR)
SWEEP_INTERVAL = seconds(0, HOUR)
"""Deprecated and unused; still checked, so that no value of it is silently odd."""
PROCESS_ID = whole(1, 2**31 - 1)
"""`--parent-pid`: a pid_t."""
RUN_TIMEOUT = seconds(0, 7 * DAY, low_open=True)
"""`Inbox.process_due(timeout=...)`, `Worker.run_until_idle(timeout=...)`."""

# -- the store (StoreOptions; `--busy-timeout` ... on serve, worker and relay) --------------

BUSY_TIMEOUT = seconds(0, HOUR)
POOL_SIZE = whole(1, 1000)
MAX_OVERFLOW = whole(0, 1000)
POOL_TIMEOUT = seconds(0, HOUR, low_open=True)
CONNECT_TIMEOUT = seconds(0, HOUR, low_open=True)
TCP_TIMEOUT = seconds(0, HOUR)
"""0: the system's own."""

# -- receiving (ReceiverSettings; `hookinbox serve`) --------------------------------------

MAX_BODY_SIZE = whole(1, 1 << 31)
BODY_TIMEOUT = seconds(0, 300, low_open=True)
"""Senders give up after 30 s at most; a body still arriving after 300 s is an attack."""
ACK_DEADLINE = seconds(0, 60, low_open=True)
"""`Inbox(ack_deadline=...)`; None turns it off (`--ack-deadline 0` on the command line)."""
ACK_DEADLINE_OPTION = seconds(0, 60)
"""`serve --ack-deadline`: 0 turns the deadline off."""
RETRY_AFTER = whole(1, 3600)
PORT = whole(0, 65535)
"""0: the kernel picks a free port."""
METRICS_PORT = whole(1, 65535)
SERVER_PROCESSES = whole(1, 64)

# -- retries (RetryPolicy) -----------------------------------------------------------------

MAX_ATTEMPTS = whole(1, 1_000_000)
RETRY_DELAY = seconds(0, YEAR)
"""`first_delay`, `max_delay`, `not_ready_deadline`."""
NOT_READY_MAX_DELAY = seconds(0, YEAR, low_open=True)
"""0 would try a stuck event in a loop, a transaction each, until its deadline."""
RETRY_FACTOR = Range(1, 100)
"""The backoff raises it to at most the 64th power: 100**64 is still a finite float."""
JITTER = Range(0, 1, high_open=True)

# -- the outbox (HTTPDestination) ---------------------------------------------------------

DESTINATION_TIMEOUT = seconds(0, HOUR, low_open=True)

# -- broker consumers (`hookinbox.brokers`; `hookinbox consume`) -------------------------

BROKER_PREFETCH = whole(1, 1000)
"""Messages in flight at once: RabbitMQ's prefetch count, a JetStream fetch's batch."""
BROKER_RETRY_DELAY = seconds(0, HOUR)
"""How long a message the store could not take waits before the broker redelivers it."""

# -- group commit (GroupCommit) ------------------------------------------------------------

GROUP_MAX_ROWS = whole(1, 2000)
"""SQLite bounds the values of one statement."""
GROUP_MAX_WAIT = seconds(0, 0.1)
GROUP_WRITERS = whole(1, 16)

# -- operators (`status --check`, the dashboard, `replay`, `events list`) -----------------

THRESHOLD = whole(0, 1_000_000_000)
"""`--max-failed`, `--min-workers`, ... and their HOOKINBOX_MAX_* variables."""
CONFIRM_ABOVE = whole(0, 1_000_000_000)
LIST_LIMIT = whole(1, 10_000)
RECONCILE_MAX_PAGES = whole(1, 1_000_000)
ROTATION_BATCH = whole(1, 10_000)
"""`hookinbox encryption rotate --batch-size`: events per transaction."""
ROTATION_PAUSE = seconds(0, 60)
"""`hookinbox encryption rotate --pause`: the rest between batches."""
"""`hookinbox reconcile --max-pages`: a provider lists 100 events a page."""
