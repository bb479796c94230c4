"""Upgrading a large inbox to schema 9 while it works (issue 45): the long tier's proofs.

- 1,000,000 events at schema 8, 500,000 of them open, and a process of schema 8 storing
  deliveries (`_schema_8_ingest.py` under uvicorn, fed by a sender process at 50 a second)
  while `hookinbox migrate` of this tree upgrades the database: every delivery is answered
  200 and within a second, before, during and after the upgrade (the step that held every
  delivery while it copied the open events took 2.4 s at 500,000 on PostgreSQL), and
  afterwards every open event is queued once, those delivered during the upgrade among them.
  On SQLite, whose step still frees the indexes the queue replaces page by page (0.5-0.9 s
  here: docs/storage.md), every delivery is answered 200, within the 3 s ack deadline.
- `hookinbox migrate` killed (SIGKILL) in the middle of copying the open events, the older
  version's processes finishing events and storing new ones meanwhile, then run again:
  exactly the open events are queued, none twice.

Each on SQLite, PostgreSQL and MariaDB; built with bulk SQL (`_schema_8.py`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from hookinbox._storage import LATEST_VERSION, Store
from tests.storage import _schema_8_ingest
from tests.storage._schema_8 import at_schema_8, fill, open_events, queue_mismatches, settle
from tests.support.server import ROOT, free_port, hookinbox_command, run_cli

pytestmark = pytest.mark.slow

ANSWER_BOUND = {"postgres": 1.0, "mysql": 1.0, "sqlite": _schema_8_ingest.ACK_DEADLINE}
"""Seconds: the issue's bound on every answer while the upgrade runs; on SQLite the ack
deadline the providers keep (3 s at the least), past which the app answers 503."""


@contextmanager
def schema_8_ingest(database_url: str) -> Iterator[str]:
    """Schema 8's ingest served by uvicorn on loopback; yields the URL to POST to."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "tests.storage._schema_8_ingest:app",
         "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
         "--no-access-log"],
        cwd=ROOT,
        env={**os.environ, _schema_8_ingest.URL_ENV: database_url},
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, "the schema 8 ingest app exited"
            try:
                if httpx.get(url, timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the schema 8 ingest app did not start"
            time.sleep(0.1)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def sender(url: str, out: Path, rate: float = 50) -> Iterator[list[list[float]]]:
    """`tests.support.steady_sender` at `url`; the list fills with `[sent, seconds, status]`
    per delivery once the block ends (the sender stopped)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.steady_sender", url, str(out), "--rate", str(rate)],
        cwd=ROOT,
    )
    answers: list[list[float]] = []
    try:
        yield answers
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
        answers.extend(json.loads(line) for line in out.read_text().splitlines())


_MIGRATE_TO_13 = (
    "import sys; from hookinbox._storage import Store;"
    " print(Store(sys.argv[1], auto_migrate=False).migrate(13))"
)


@pytest.mark.parametrize("backend", ["postgres", "mysql", "sqlite"])
def test_upgrading_500000_open_events_under_ingest_answers_every_delivery_in_time(
    backend: str, empty_db_url: str, tmp_path: Path
) -> None:
    store = at_schema_8(empty_db_url)
    fill(store, 1_000_000)
    settle(store)
    assert open_events(store) == 500_000
    with schema_8_ingest(empty_db_url) as url, sender(url, tmp_path / "answers") as answers:
        time.sleep(1)  # a second of answers before the upgrade
        started = time.monotonic()
        # To schema 13, the last that schema 8's ingest can insert into (schema 14 drops the
        # events' bodies: older processes fail closed, docs/upgrading.md).
        result = subprocess.run(
            [sys.executable, "-c", _MIGRATE_TO_13, empty_db_url],
            cwd=ROOT, capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        took = time.monotonic() - started
        time.sleep(1)  # and after
    assert result.returncode == 0, result.stderr
    assert "(8, 13)" in result.stdout
    during = [a for a in answers if started <= a[0] <= started + took]
    slowest = max(seconds for _, seconds, _ in answers)
    top = sorted(answers, key=lambda a: -a[1])[:5]
    report = (
        f"{len(answers)} answers, {len(during)} during the {took:.1f} s upgrade, slowest"
        f" {slowest * 1000:.0f} ms; the five slowest (sent at s after the upgrade began: ms):"
        f" {', '.join(f'{a[0] - started:.1f}: {a[1] * 1000:.0f}' for a in top)}"
    )
    print(report)
    assert len(during) >= 20, report  # the deliveries did overlap the upgrade
    assert {status for _, _, status in answers} == {200}, report
    assert slowest < ANSWER_BOUND[backend], report
    assert queue_mismatches(store) == {  # each answer is an event of its own, stored
        "missing": 0, "extra": 0, "wrong_state": 0, "queued": 500_000 + len(answers),
    }  # fmt: skip
    store.dispose()


def _queued(store: Store) -> int:
    """Queue rows committed so far (0 while the table does not exist)."""
    with store.engine.connect() as connection:
        if not sa.inspect(connection).has_table("hookinbox_event_queue"):
            return 0
        return int(
            connection.exec_driver_sql("SELECT count(*) FROM hookinbox_event_queue").scalar_one()
        )


def _version(store: Store) -> int:
    with store.engine.connect() as connection:
        return int(
            connection.exec_driver_sql(
                "SELECT max(version) FROM hookinbox_schema_versions"
            ).scalar_one()
        )


_SCHEMA_8_WORK = (
    "UPDATE hookinbox_events SET status = 'processing', attempts = attempts + 1,"
    " lease_token = 'ffffffffffffffffffffffffffffffff' WHERE id % 1000 = 12 AND status = 'pending'",
    "UPDATE hookinbox_events SET status = 'processed', outcome = 'handled',"
    " attempts = attempts + 1 WHERE id % 1000 = 10 AND status = 'pending'",
    "UPDATE hookinbox_events SET status = 'pending', outcome = NULL"
    " WHERE id % 1000 = 11 AND status = 'processed'",
)


@pytest.mark.parametrize("backend", ["postgres", "mysql", "sqlite"])
def test_a_migrate_killed_mid_copy_resumes_and_queues_each_open_event_once(
    empty_db_url: str,
) -> None:
    store = at_schema_8(empty_db_url)
    fill(store, 400_000)
    settle(store)
    process = subprocess.Popen(
        hookinbox_command("migrate", "--database-url", empty_db_url),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while not 0 < _queued(store) < 100_000:
        assert process.poll() is None, "migrate ended before it was seen copying"
        assert time.monotonic() < deadline, "migrate was never seen copying"
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert _version(store) == 8
    copied = _queued(store)
    assert 0 < copied < 200_000, copied  # killed mid-copy: part of the open events queued
    # The processes of schema 8 go on: their ingest stores 10,000 more events, their workers
    # lease some open events and finish others (copied, not yet copied, new), a replay opens
    # processed ones again.
    fill(store, 10_000, start=400_000, ingest=True)
    with store.engine.begin() as connection:
        for statement in _SCHEMA_8_WORK:
            assert connection.execute(sa.text(statement)).rowcount > 0, statement
    result = run_cli("migrate", "--database-url", empty_db_url, timeout=900)
    assert result.returncode == 0, result.stderr
    assert f"from version 8 to {LATEST_VERSION}" in result.stdout
    expected = open_events(store)
    assert queue_mismatches(store) == {
        "missing": 0, "extra": 0, "wrong_state": 0, "queued": expected,
    }  # fmt: skip
    store.dispose()
