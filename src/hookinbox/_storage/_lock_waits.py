"""A migration's transaction that takes a table's strong lock, waiting for it a little at a time.

Creating a trigger, `LOCK TABLE`, `ALTER TABLE`: each waits for every transaction using the
table, and PostgreSQL queues every later request for the table behind the waiting one. An
older worker's processing transaction (its claim is written first, then its handler runs) held
`hookinbox_events` for as long as its handler ran, and every delivery waited that long behind
the migration (2.5 s for a handler of 2.5 s: `tests/storage/test_queue_copy.py`).

So `patiently` runs such a transaction with a bound on each lock wait (the dialect's
`limit_lock_waits`: PostgreSQL's `lock_timeout`), and when a wait runs out, rolls back and tries
again after a pause, the bound doubling from `FIRST_WAIT` up to `LONGEST_WAIT`: a delivery
waits that long at most per try, and the transactions already holding the table finish
meanwhile. After `TRIES` tries the transaction waits as long as it takes, as it always did:
a table never free for `LONGEST_WAIT` would never be migrated otherwise. On a framework's
connection (Django's transaction, which cannot be tried again) it waits as long as it takes.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy import Engine

from hookinbox._logging import logger
from hookinbox._storage._dialects import dialect_of
from hookinbox._storage._dialects._borrowed import OwnsNoTransactions

log = logger("hookinbox._storage")
T = TypeVar("T")

FIRST_WAIT = 0.1
LONGEST_WAIT = 0.5
"""Seconds: well inside a provider's ack deadline (3 s at the least), with the step's own
time on top."""
TRIES = 20
PAUSE = 0.5
"""Seconds between tries (jittered by half either way): the deliveries held during the last
wait are stored, and the transactions holding the table may end."""


def patiently(engine: Engine, attempt: Callable[[float | None], T]) -> T:
    """`attempt(wait)` in a transaction of its own, each lock wait in it bounded by `wait`
    seconds (None: unbounded), tried again while a wait runs out."""
    dialect = dialect_of(engine)
    if isinstance(engine.dialect, OwnsNoTransactions):
        return attempt(None)
    wait = FIRST_WAIT
    for run in range(1, TRIES + 1):
        try:
            return attempt(wait)
        except sa.exc.DBAPIError as error:
            if not dialect.gave_up_waiting(error):
                raise
            log.warning(
                "migration: another transaction held hookinbox's tables for over %.1f s;"
                " trying again (%d of %d)",
                wait,
                run,
                TRIES,
            )
        time.sleep(PAUSE * random.uniform(0.5, 1.5))
        wait = min(LONGEST_WAIT, 2 * wait)
    log.warning("migration: waiting for hookinbox's tables as long as it takes")
    return attempt(None)
