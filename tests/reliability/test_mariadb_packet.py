"""MariaDB with the smallest `max_allowed_packet` hookinbox accepts, 4 MiB, against bodies at
the limit (issue 45, item 6), on a server of the test's own (`_mariadb.py`, started with
`--max-allowed-packet=4M`; the shared server's globals are never touched).

A body travels inside its statement escaped, up to twice its size. Before: group commit put
up to 2 MiB of bodies in one statement, so two 1 MiB bodies of backslashes made a statement
over 4 MiB, the server dropped the connection ("server has gone away") and both deliveries
got 503 (5 of 6 in a round of six); a 3 MiB body limit was accepted at start-up and every
such body got 503, never stored. Now:

- six concurrent 1 MiB bodies of backslashes over real HTTP (`hookinbox serve`), round after
  round, are all answered 200 and stored byte for byte, group commit sharing transactions
  (its statements cut to the packet the server reported at connect);
- `hookinbox serve` of an app whose body limit no statement can carry (3 MiB) stops at
  start-up with one line naming both settings, exit 2;
- a packet lowered after the inbox started (new sessions read it) answers a body it can no
  longer carry 413, never 503, and stores nothing of it.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import sqlalchemy as sa

from hookinbox._storage import Store
from hookinbox._storage._schema import events, payloads
from tests.apps import basic, large_bodies
from tests.reliability import _mariadb
from tests.reliability._report import Trial, record
from tests.support.large_bodies import backslash_delivery
from tests.support.server import free_port, hookinbox_command, run_cli, serving
from tests.support.signing import stripe_delivery, stripe_event

pytestmark = [pytest.mark.mysql, pytest.mark.slow]

PACKET = 4 * 1024 * 1024
MIB = 1024 * 1024
SENDERS = 6
ROUNDS = 4


@pytest.fixture(scope="module")
def small_packet_server() -> Iterator[_mariadb.MariaDBServer]:
    reason = _mariadb.unavailable_reason()
    if reason is not None:
        if _mariadb.REQUIRE_SERVER:
            pytest.fail(reason)
        pytest.skip(reason)
    with _mariadb.throwaway_server("--max-allowed-packet=4M") as server:
        yield server


@pytest.fixture
def database_url(small_packet_server: _mariadb.MariaDBServer) -> str:
    name = f"packet_{time.monotonic_ns()}"
    url = small_packet_server.create_database(name)
    store = Store(url)
    store.migrate()
    store.dispose()
    return url


def stored_digests(url: str) -> dict[str, bytes]:
    store = Store(url)
    try:
        with store.engine.connect() as connection:
            query = sa.select(events.c.event_id, payloads.c.body).join_from(
                events, payloads, payloads.c.id == events.c.id
            )
            rows = connection.execute(query).all()
    finally:
        store.dispose()
    return {event_id: hashlib.sha256(body).digest() for event_id, body in rows}


def shared_batches(metrics: str) -> int:
    """Transactions of group commit that stored more than one delivery, from /metrics."""
    count = re.search(r"^hookinbox_ingest_batch_size_count (\S+)$", metrics, re.M)
    alone = re.search(r'^hookinbox_ingest_batch_size_bucket\{le="1\.0"\} (\S+)$', metrics, re.M)
    assert count and alone, metrics[-2000:]
    return round(float(count[1]) - float(alone[1]))


def test_six_concurrent_megabyte_bodies_of_backslashes_are_all_stored(
    small_packet_server: _mariadb.MariaDBServer, database_url: str
) -> None:
    small_packet_server.execute(f"SET GLOBAL max_allowed_packet = {PACKET}")  # as started
    port = free_port()
    command = hookinbox_command(
        "serve", "tests.apps.basic:inbox", "--database-url", database_url,
        "--port", str(port), "--no-worker", "--log-level", "warning",
    )  # fmt: skip
    sent: dict[str, bytes] = {}
    statuses: Counter[int] = Counter()
    with serving(command, port) as base_url, httpx.Client(timeout=60) as client:

        def post(delivery: tuple[dict[str, str], bytes]) -> int:
            headers, body = delivery
            return client.post(
                f"{base_url}/webhooks/stripe", headers=headers, content=body
            ).status_code

        for round_ in range(ROUNDS):
            deliveries = [
                backslash_delivery(f"evt_r{round_}_{n}", MIB, basic.STRIPE_SECRET)
                for n in range(SENDERS)
            ]
            sent |= {f"evt_r{round_}_{n}": body for n, (_, body) in enumerate(deliveries)}
            with ThreadPoolExecutor(SENDERS) as pool:
                statuses.update(pool.map(post, deliveries))
        time.sleep(1.5)  # ingest's counts reach /metrics once a second
        shared = shared_batches(client.get(f"{base_url}/metrics").text)

    assert statuses == Counter({200: SENDERS * ROUNDS}), statuses
    expected = {event_id: hashlib.sha256(body).digest() for event_id, body in sent.items()}
    assert stored_digests(database_url) == expected
    assert shared >= 1, "group commit never put two deliveries in one transaction"
    record(
        Trial(
            fault=f"MariaDB max_allowed_packet 4 MiB: {SENDERS} concurrent 1 MiB bodies of "
            f"backslashes, {ROUNDS} rounds",
            backend="mysql",
            deliveries=SENDERS * ROUNDS,
            detail=f"answers {dict(statuses)}; all stored byte for byte; {shared} group "
            "commit transactions held more than one",
        )
    )


def test_a_body_limit_no_statement_can_carry_stops_serve_at_start_up(database_url: str) -> None:
    started = time.monotonic()
    result = run_cli(
        "serve", "tests.apps.large_bodies:inbox", "--database-url", database_url,
        "--port", str(free_port()), "--no-worker", timeout=30,
    )  # fmt: skip
    took = time.monotonic() - started
    assert result.returncode == 2, result.stderr[-2000:]
    [line] = result.stderr.strip().splitlines()
    assert f"max_body_size is {large_bodies.MAX_BODY_SIZE} bytes" in line, line
    assert f"max_allowed_packet is {PACKET} bytes" in line, line
    record(
        Trial(
            fault="MariaDB max_allowed_packet 4 MiB, hookinbox serve with a 3 MiB body limit",
            backend="mysql",
            deliveries=0,
            detail=f"exit 2 in {took:.1f} s: {line}",
        )
    )


def test_a_packet_lowered_after_start_answers_413_never_503(
    small_packet_server: _mariadb.MariaDBServer, database_url: str
) -> None:
    small_packet_server.execute(f"SET GLOBAL max_allowed_packet = {2 * PACKET}")
    inbox = basic.build(database_url, max_body_size=large_bodies.MAX_BODY_SIZE)
    try:
        first = inbox.receive(
            "stripe", *stripe_delivery(stripe_event("evt_first"), basic.STRIPE_SECRET)
        )
        assert first.status_code == 200  # started: 3 MiB fits an 8 MiB packet
        small_packet_server.execute(f"SET GLOBAL max_allowed_packet = {PACKET}")
        inbox.store.engine.dispose()  # the sessions read the server's packet when they open

        big = inbox.receive("stripe", *backslash_delivery("evt_big", 3 * MIB, basic.STRIPE_SECRET))
        fits = inbox.receive("stripe", *backslash_delivery("evt_fits", MIB, basic.STRIPE_SECRET))
    finally:
        inbox.close()
        small_packet_server.execute(f"SET GLOBAL max_allowed_packet = {PACKET}")
    assert (big.status_code, big.body["error"]) == (413, "too_large"), big.body
    assert "max_allowed_packet" in big.body["detail"], big.body
    assert fits.status_code == 200, fits.body
    assert sorted(stored_digests(database_url)) == ["evt_first", "evt_fits"]
    record(
        Trial(
            fault="MariaDB max_allowed_packet lowered from 8 to 4 MiB under a started inbox",
            backend="mysql",
            deliveries=3,
            detail=f"a 3 MiB body: {big.status_code} ({big.body['detail']}); 1 MiB: "
            f"{fits.status_code}",
        )
    )
