"""MariaDB made read-only under a running `hookinbox serve`: 503, not ready, then writes resume.

A replica promoted the wrong way round, or a primary an operator fenced with `SET GLOBAL
read_only = 1`, refuses every write with error 1290. hookinbox counts that as a lost
connection (docs/storage.md, MariaDB): the delivery is answered 503 with Retry-After, never
500, the session is dropped so the next one may find a writable server, and /readyz answers
503. Once `read_only` is off again, writes resume by themselves in the same processes.

`read_only` does not stop a user with SUPER (or READ ONLY ADMIN), root among them, so serve
connects as a user of its own with rights on its database only, as an application does. The
server is a throwaway one of the test's own (`_mariadb.py`): the shared server's global
settings are never touched. Root's own session shows the readiness probe's second check: a
user whose writes `read_only` lets through is still told the server is not ready.
"""

from __future__ import annotations

import time

import httpx
import pytest
import sqlalchemy as sa

from hookinbox._errors import StoreUnavailable
from hookinbox._storage import Store, parse_url
from tests.reliability._load import (
    handles_sigterm,
    ready,
    roles,
    serve_command,
    stop_server,
    wait_until,
)
from tests.reliability._mariadb import MariaDBServer
from tests.reliability._report import Trial, record
from tests.reliability._restart import LATENCY_BOUND, RECOVERY_BOUND, probe
from tests.support.server import free_port, serving_process

pytestmark = [pytest.mark.mysql, pytest.mark.slow]

USER, PASSWORD = "shop", "shop-secret"
READ_ONLY_FOR = 1.5
"""Seconds of probes while the server is read-only."""
PROBE_INTERVAL = 0.15


def test_a_read_only_mariadb_is_answered_503_and_not_ready_until_writable(
    mariadb: MariaDBServer,
) -> None:
    mariadb.create_database("hookinbox")
    mariadb.execute(
        f"CREATE USER '{USER}'@'127.0.0.1' IDENTIFIED BY '{PASSWORD}'",
        f"GRANT ALL PRIVILEGES ON hookinbox.* TO '{USER}'@'127.0.0.1'",
    )
    database_url = mariadb.url("hookinbox", user=USER, password=PASSWORD)
    port = free_port()
    with serving_process(serve_command(database_url, port), port) as (process, base_url):
        target = f"{base_url}/webhooks/stripe"
        wait_until(lambda: len(roles(process.pid)["worker"]) == 1, timeout=30, what="the worker")
        [worker] = roles(process.pid)["worker"]
        wait_until(lambda: handles_sigterm(worker), timeout=30, what="the worker's loops")
        with httpx.Client(timeout=30) as client:
            before, _ = probe(client, target, "evt_ro_before")

            mariadb.execute("SET GLOBAL read_only = 1")
            refused: list[tuple[httpx.Response, float]] = []
            started = time.monotonic()
            while time.monotonic() - started < READ_ONLY_FOR:
                refused.append(probe(client, target, f"evt_ro_{len(refused)}"))
                time.sleep(PROBE_INTERVAL)
            readyz = client.get(f"{base_url}/readyz")
            root_store = Store(mariadb.url("hookinbox"), auto_migrate=False)
            try:
                with pytest.raises(StoreUnavailable, match="read-only"):
                    root_store.ping()  # root writes through read_only; still not ready
            finally:
                root_store.dispose()

            mariadb.execute("SET GLOBAL read_only = 0")
            recovery = wait_until(
                lambda: ready(base_url) == 200,
                timeout=RECOVERY_BOUND,
                what="/readyz to answer 200 once the server is writable again",
            )
            again = [probe(client, target, f"evt_ro_{n}")[0] for n in range(len(refused))]
            after, _ = probe(client, target, "evt_ro_after")
        wait_until(lambda: _orders(database_url) == len(refused) + 2, timeout=30,
                   what="every accepted checkout processed")  # fmt: skip
        workers_after = roles(process.pid)["worker"]
        exit_code = stop_server(process)

    assert before.status_code == 200 and before.json()["status"] == "accepted"
    assert refused, "no delivery was sent while the server was read-only"
    for response, seconds in refused:
        assert response.status_code == 503, response.text  # never 500
        assert response.headers["retry-after"].isdigit()
        assert response.json()["error"] == "unavailable"
        assert seconds < LATENCY_BOUND
    assert readyz.status_code == 503 and readyz.headers.get("retry-after")
    # Nothing was written while read-only: each refused delivery is new once writable.
    assert [r.json()["status"] for r in again] == ["accepted"] * len(refused)
    assert after.status_code == 200 and after.json()["status"] == "accepted"
    assert _orders(database_url) == len(refused) + 2  # each processed once
    assert workers_after == [worker] and exit_code == 0

    record(
        Trial(
            fault="MariaDB made read-only (SET GLOBAL read_only = 1) under serve",
            backend="mysql",
            deliveries=2 * len(refused) + 2,
            restarts=0,
            detail=(
                f"{len(refused)} deliveries while read-only answered 503 with Retry-After "
                f"(max {max(s for _, s in refused):.3f} s), none 500; /readyz 503 (root too); "
                f"/readyz 200 {recovery:.1f} s after read_only = 0; the refused ones accepted "
                "as new afterwards, each processed once; no hookinbox process restarted"
            ),
        )
    )


def _orders(database_url: str) -> int:
    engine = sa.create_engine(parse_url(database_url))
    try:
        with engine.connect() as connection:
            query = sa.text("SELECT count(*) FROM shop_orders WHERE payment_id LIKE 'pi_evt_ro_%'")
            return int(connection.execute(query).scalar_one())
    finally:
        engine.dispose()
