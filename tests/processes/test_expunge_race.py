"""An erasure racing a real `hookinbox worker` process that is processing the event (its
handler blocked inside the attempt until the erasure has happened), on each database, with
the outcome docs/operations.md ("Erasing payloads") promises: the erasure is not refused and,
on PostgreSQL and MariaDB, does not wait for the handler (on SQLite, where one transaction
writes at a time, it waits for the handler's transaction, then erases); the attempt goes on
with the body it read and the event ends processed, its payload gone, audited once; a
redelivery afterwards is a duplicate that stores nothing and is not processed again."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from hookinbox import Outcome, Status
from hookinbox._operations._service import Operations
from hookinbox._records import Actor
from hookinbox._storage._schema import audit, deliveries, events, payloads
from tests.apps import held
from tests.support.workers import WorkerProcess, opened_store, read_all, wait_for

pytestmark = pytest.mark.slow  # a worker process

APP = "tests.apps.held:inbox"
EVENT = "evt_busy"


def test_an_erasure_while_a_worker_process_runs_the_handler(db_url: str, tmp_path: Path) -> None:
    assert held.deliver(db_url, EVENT, customer="cus_42").status_code == 200
    inside, go, seen = tmp_path / "inside", tmp_path / "go", tmp_path / "body"
    env = {held.MARKER_ENV: str(inside), held.UNTIL_ENV: str(go), held.BODY_ENV: str(seen)}
    worker = WorkerProcess(db_url, env=env, app=APP)
    try:
        with opened_store(db_url, migrate=False) as store:
            wait_for(
                inside.exists, timeout=60, what="the handler to start", describe=worker.describe
            )
            operations = Operations(store)
            event = operations.event("stripe", EVENT)
            assert event is not None and event.status is Status.PROCESSING

            erased: list[bool | None] = []
            erasing = threading.Thread(
                target=lambda: erased.append(
                    operations.expunge_one(
                        "stripe", EVENT, datetime.now(UTC), actor=Actor("ops", "GDPR 42")
                    )
                )
            )
            erasing.start()
            if store.dialect.single_writer:
                # SQLite: the handler's transaction holds the write lock; the erasure waits.
                erasing.join(0.5)
                assert erasing.is_alive(), "the erasure wrote while the handler held the lock"
                go.touch()
            erasing.join(10)
            assert not erasing.is_alive(), "the erasure waited for the worker's handler"
            assert erased == [True]
            go.touch()  # the handler ends its attempt now: after the erasure

            wait_for(
                lambda: operations.event("stripe", EVENT).status is Status.PROCESSED,  # type: ignore[union-attr]
                timeout=30,
                what="the attempt to end processed",
                describe=worker.describe,
            )
            assert b"cus_42" in seen.read_bytes()  # the attempt ran with the body it had read
            done = operations.event("stripe", EVENT)
            assert done is not None and (done.body, done.headers, done.attempts) == (b"", {}, 1)
            previous = read_all(store, sa.select(audit.c.action, audit.c.previous_status))
            # PostgreSQL and MariaDB erased during the attempt; SQLite right after it.
            during = "processed" if store.dialect.single_writer else "processing"
            assert [tuple(row) for row in previous] == [("expunge", during)]

            again = held.deliver(db_url, EVENT, customer="cus_42")
            assert again.status_code == 200 and again.outcome is Outcome.DUPLICATE
            kept = sa.select(payloads.c.id).join(events, events.c.id == payloads.c.id)
            assert read_all(store, kept.where(events.c.event_id == EVENT)) == []
            log = read_all(store, sa.select(deliveries.c.duplicate).order_by(deliveries.c.id))
            assert [row.duplicate for row in log] == [False, True]
            inside.unlink()
            time.sleep(1.5)  # a worker woken by new work would have run the handler by now
            assert not inside.exists(), "the duplicate was processed again"
            after = operations.event("stripe", EVENT)
            assert after is not None and (after.status, after.attempts) == (Status.PROCESSED, 1)
            assert worker.running(), worker.describe()
    finally:
        go.touch()
        worker.close()
