"""Worker liveness from heartbeats, with real processes (issue 24, item 3; issue 31, item 6).

A `hookinbox worker` and a `hookinbox relay` beat every 0.2 s; `status --check` and `/metrics`
see them per host. SIGKILL the worker (no handler runs, as with the OOM killer): its row stays,
its heartbeat expires after three intervals, and the check alarms, together with the oldest
pending event that nobody processes. A SIGTERM'd relay removes its own row.

The database's clock decides (PostgreSQL): workers whose clocks are 2 h ahead and 2 min behind
(libfaketime) beat beside one on time; all three count as alive at every look, none deletes
another's row, and the one ahead counts as dead three intervals after its SIGKILL.
"""

from __future__ import annotations

import glob
import json
import signal
import socket
import time
from datetime import UTC, datetime, timedelta

import pytest

from hookinbox._metrics import exposition
from hookinbox._operations._service import Operations
from hookinbox._storage._schema import event_queue, events
from tests.apps import orders
from tests.support.server import run_cli
from tests.support.workers import Workers, checkout_event, deliver, opened_store, wait_for

BEAT = "0.2"
HOST = socket.gethostname()


def test_a_killed_worker_goes_stale_and_the_check_alarms(db_url: str) -> None:
    orders.create_tables(db_url)
    check = ("status", "--check", "--json", "--database-url", db_url, "--min-workers", "1")
    with (
        opened_store(db_url) as store,
        Workers(db_url, "--heartbeat-interval", BEAT) as workers,
        Workers(db_url, "--heartbeat-interval", BEAT, command="relay") as relays,
    ):

        def live() -> dict[tuple[str, str], int]:
            with store.reading() as connection:
                return store.liveness.live(connection)

        [worker] = workers.start()
        [relay] = relays.start()
        both = {(HOST, "worker"): 1, (HOST, "relay"): 1}
        wait_for(
            lambda: live() == both, timeout=30, what="two heartbeats", check=workers.check_alive
        )
        healthy = run_cli(*check)
        assert (healthy.returncode, json.loads(healthy.stdout)) == (0, {"ok": True, "breaches": []})
        metrics = exposition(Operations(store))[0].decode()
        assert f'hookinbox_live_workers{{host="{HOST}",kind="worker"}} 1.0' in metrics

        worker.kill()
        wait_for(lambda: live() == {(HOST, "relay"): 1}, timeout=10, what="the heartbeat to expire")
        with store.reading() as connection:
            kinds = {(row["kind"], row["pid"]) for row in store.liveness.rows(connection)}
        assert ("worker", worker.pid) in kinds  # the dead worker's row stays, expired
        inbox = orders.build(db_url)
        try:
            deliver(inbox, checkout_event(1))  # nobody processes it now
        finally:
            inbox.close()
        with store.transaction() as connection:
            two_minutes_ago = datetime.now(UTC) - timedelta(minutes=2)
            connection.execute(events.update().values(received_at=two_minutes_ago))
            connection.execute(event_queue.update().values(received_at=two_minutes_ago))

        alarm = run_cli(*check, "--max-pending-age", "90s")

        assert alarm.returncode == 1, alarm.stderr
        report = json.loads(alarm.stdout)
        assert report["ok"] is False
        assert report["breaches"][0].startswith("live workers: 0 (threshold: at least 1")
        assert report["breaches"][1].startswith("oldest pending event is 2.")
        metrics = exposition(Operations(store))[0].decode()
        assert f'hookinbox_live_workers{{host="{HOST}",kind="worker"}}' not in metrics
        assert "hookinbox_oldest_pending_age_seconds 1" in metrics  # 120 s and a bit

        relay.wait_ready()
        relay.signal(signal.SIGTERM)
        assert relay.wait(30) == 0, relay.describe()
        with store.reading() as connection:
            left = [row["kind"] for row in store.liveness.rows(connection)]
        assert left == ["worker"]  # a clean stop removes its row; the dead one's stays


FAKETIME = next(iter(sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1"))), None)
"""Debian's libfaketime (the `faketime` package; .ci/run installs it)."""


def clock_off_by(offset: str) -> dict[str, str]:
    """The environment of a process whose wall clock is `offset` ("+2h", "-2m") off."""
    if FAKETIME is None:
        pytest.skip("libfaketime is missing: apt-get install faketime")  # CI fails on a skip
    return {"LD_PRELOAD": FAKETIME, "FAKETIME": offset, "FAKETIME_DONT_FAKE_MONOTONIC": "1"}


def live_by_status(db_url: str) -> int:
    """Live workers on this host, as a `hookinbox status` process (its own clock) counts them."""
    shown = run_cli("status", "--json", "--database-url", db_url)
    assert shown.returncode == 0, shown.stderr
    found = json.loads(shown.stdout)["live_workers"]
    return sum(w["count"] for w in found if (w["host"], w["kind"]) == (HOST, "worker"))


@pytest.mark.parametrize("backend", ["postgres"])
def test_the_database_clock_decides_who_is_alive(db_url: str) -> None:
    orders.create_tables(db_url)
    beat = ("--heartbeat-interval", BEAT)
    check = ("status", "--check", "--json", "--database-url", db_url, "--min-workers", "3")
    with (
        Workers(db_url, *beat) as on_time,
        Workers(db_url, *beat, env=clock_off_by("+2h")) as ahead,
        Workers(db_url, *beat, env=clock_off_by("-2m")) as behind,
    ):
        on_time.start()
        [fast] = ahead.start()
        behind.start()

        def all_started() -> None:
            for group in (on_time, ahead, behind):
                group.check_alive()

        with opened_store(db_url) as store:

            def rows() -> int:
                with store.reading() as connection:
                    return len(store.liveness.rows(connection))

            wait_for(lambda: rows() == 3, timeout=30, what="three heartbeats", check=all_started)
        breached = []
        for _ in range(6):
            looked = run_cli(*check)
            breached += [looked.stdout] if looked.returncode else []
            time.sleep(0.1)
        assert breached == [], breached  # the one ahead deleted no live row; none looks dead
        assert live_by_status(db_url) == 3

        fast.kill()
        wait_for(
            lambda: live_by_status(db_url) == 2,
            timeout=15,
            what="the killed worker (clock 2 h ahead) to count as dead",
        )
