"""A destination that answers with a hostile `Retry-After`, against a real relay process.

What it proves, with `hookinbox relay` (the shipping app: max_delay 1 s) delivering to a
loopback receiver whose first answer to each message is 429 with a `Retry-After` of a year,
of 10^20 seconds, of 3,000 digits, a date in year 9999, a date in the past or garbage: every
message is delivered on its second attempt, within the policy's bounds. Before the clamp, a
year-long value parked its message for a year, and 10^20 raised OverflowError inside the
relay: the message stayed `delivering` until its lease expired and was swept as "relay lost".
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from hookinbox._storage import Store
from hookinbox._storage._schema import outbox
from tests.outbox.test_relay_processes import queue_messages, statuses
from tests.reliability._report import Trial, record
from tests.support.receiver import running_receiver
from tests.support.workers import Workers, wait_for

HOSTILE = [
    "31536000", "99999999999999999999", "9" * 3000, "Fri, 31 Dec 9999 23:59:59 GMT",
    "Thu, 01 Jan 1970 00:00:00 GMT", "soon, maybe",
]  # fmt: skip


@pytest.mark.parametrize("backend", ["postgres"])
def test_a_hostile_retry_after_delays_a_message_at_most_the_policys_max(db_url: str) -> None:
    with running_receiver() as receiver:
        keys = sorted(queue_messages(db_url, receiver.url, len(HOSTILE)))
        answer = dict(zip(keys, HOSTILE, strict=True))
        receiver.plan = lambda key, attempt: f"429:{answer[key]}" if attempt == 1 else "ok"
        store = Store(db_url)
        env = {"OUTBOX_TARGET": receiver.url}
        app = "tests.apps.shipping:inbox"
        with Workers(db_url, "--lease-seconds", "60", env=env, command="relay", app=app) as relays:
            relays.start(1)
            wait_for(
                lambda: statuses(store).get("delivered", 0) == len(keys),
                timeout=45,  # a second try is due within max_delay (1 s) of the first
                what="every message delivered on its second try",
                describe=lambda: f"{statuses(store)}; {relays.describe()}",
            )
            output = relays.describe()
            codes = relays.terminate_all(timeout=30)
        with store.engine.connect() as connection:
            rows = connection.execute(sa.select(outbox.c.message_key, outbox.c.attempts))
            attempts = {key: count for key, count in rows}
        store.dispose()
    assert set(codes.values()) == {0}
    assert attempts == dict.fromkeys(keys, 2)  # no lease swept, no extra try
    assert "Traceback" not in output and "relay lost" not in output, output
    assert sorted(receiver.applied) == keys
    record(
        Trial(
            fault="destination answers 429 with a hostile Retry-After (relay process)",
            backend="postgres",
            deliveries=len(keys),
            detail=f"{len(HOSTILE)} values (a year, 10^20 s, 3000 digits, year 9999, 1970, "
            "garbage): every message delivered on its 2nd try within max_delay 1 s; "
            "0 leases swept, 0 tracebacks",
        )
    )
