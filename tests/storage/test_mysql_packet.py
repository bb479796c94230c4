"""MariaDB's `max_allowed_packet` against the body limit (issue 45, item 6), on the shared
test server, whose packet is read and never changed here (tests/reliability/
test_mariadb_packet.py sets a small one on a server of its own).

A body travels to MariaDB inside its statement, escaped: up to twice its size. A body limit
that no statement could carry even alone is refused when the inbox starts, in one line naming
both settings (before, the inbox started, and every such delivery got 503 for as long as the
provider retried: lost once it gave up); the largest limit that is accepted stores bodies of
that size made of the bytes a driver escapes, two of them at once through group commit.
"""

from __future__ import annotations

import hashlib
from collections.abc import MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from hookinbox import ConfigurationError, Inbox
from hookinbox._storage._dialects._mysql._packet import largest_body
from hookinbox._storage._schema import events, payloads
from hookinbox.sources import Stripe
from tests.support.large_bodies import backslash_delivery
from tests.support.signing import stripe_delivery, stripe_event

SECRET = "whsec_packet_test"
on_mariadb = pytest.mark.parametrize("backend", ["mysql"])


def server_packet(url: str) -> int:
    engine = sa.create_engine(make_url(url).set(drivername="mysql+pymysql"), poolclass=sa.NullPool)
    try:
        with engine.connect() as connection:
            return int(
                connection.exec_driver_sql("SELECT @@global.max_allowed_packet").scalar_one()
            )
    finally:
        engine.dispose()


def inbox_on(url: str, max_body_size: int) -> Inbox:
    return Inbox(url, sources=[Stripe(secret=SECRET)], max_body_size=max_body_size)


async def start_asgi(inbox: Inbox) -> list[MutableMapping[str, Any]]:
    """What the inbox's ASGI app says to a server starting and stopping it (lifespan)."""
    incoming = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    said: list[MutableMapping[str, Any]] = []

    async def receive() -> MutableMapping[str, Any]:
        return incoming.pop(0)

    async def send(message: MutableMapping[str, Any]) -> None:
        said.append(message)

    with anyio.fail_after(30):
        await inbox.asgi()({"type": "lifespan", "asgi": {"version": "3.0"}}, receive, send)
    return said


@on_mariadb
def test_a_body_limit_no_statement_can_carry_is_refused_when_the_inbox_starts(
    db_url: str,
) -> None:
    packet = server_packet(db_url)
    headers, body = stripe_delivery(stripe_event("evt_small"), SECRET)

    inbox = inbox_on(db_url, max_body_size=packet // 2)  # escaped: the whole packet, and more
    with pytest.raises(ConfigurationError) as refused:
        inbox.receive("stripe", headers, body)
    inbox.close()
    said = str(refused.value)
    assert "\n" not in said
    assert f"max_body_size is {packet // 2} bytes" in said
    assert f"max_allowed_packet is {packet} bytes" in said

    served = inbox_on(db_url, max_body_size=packet // 2)
    [failed] = anyio.run(start_asgi, served)  # an ASGI server stops at start-up, saying why
    served.close()
    assert failed == {"type": "lifespan.startup.failed", "message": said}


@on_mariadb
def test_the_largest_body_limit_accepted_stores_such_bodies_two_at_once(db_url: str) -> None:
    packet = server_packet(db_url)
    largest = largest_body(packet)
    assert largest > packet // 2 - 128 * 1024  # what is kept back is small

    too_large = inbox_on(db_url, max_body_size=largest + 1)
    small = stripe_delivery(stripe_event("evt_small"), SECRET)
    with pytest.raises(ConfigurationError, match="max_allowed_packet"):
        too_large.receive("stripe", *small)
    too_large.close()

    inbox = inbox_on(db_url, max_body_size=largest)
    sent = {f"evt_big_{n}": backslash_delivery(f"evt_big_{n}", largest, SECRET) for n in range(2)}
    with ThreadPoolExecutor(len(sent)) as pool:
        replies = list(pool.map(lambda d: inbox.receive("stripe", *d), sent.values()))
    inbox.close()
    assert [reply.status_code for reply in replies] == [200, 200], [r.body for r in replies]
    engine = sa.create_engine(make_url(db_url).set(drivername="mysql+pymysql"))
    with engine.connect() as connection:
        query = sa.select(events.c.event_id, payloads.c.body).join_from(
            events, payloads, payloads.c.id == events.c.id
        )
        stored = dict(connection.execute(query).all())
    engine.dispose()
    assert {key: hashlib.sha256(body).digest() for key, body in stored.items()} == {
        key: hashlib.sha256(body).digest() for key, (_, body) in sent.items()
    }
