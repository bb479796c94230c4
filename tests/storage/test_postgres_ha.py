"""PostgreSQL in HA (issue 25): multi-host URLs, the LISTEN connection, the database encoding.

A real server at 127.0.0.1:5432 stands for every host: libpq tries the hosts of a URL in
order, so a closed port first (127.0.0.1:1) and the real server second is a primary that
moved, and 127.0.0.1 listed twice is a two-node cluster whose nodes are both reachable.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from hookinbox import ConfigurationError, Inbox, StoreOptions, StoreUnavailable
from hookinbox._storage import Listener, Store, parse_url
from tests.apps import orders as orders_app
from tests.conftest import _admin_engine, _postgres_database
from tests.processing.test_wakeup import LONG_POLL, deliver, running_worker, wait_processed
from tests.support.asgi import ASGIClient
from tests.support.server import run_cli

CLOSED = "127.0.0.1:1"
"""Nothing listens on port 1: a host that is down (refused at once, not a timeout)."""

pytestmark = pytest.mark.postgres


@pytest.fixture
def empty_pg(request: pytest.FixtureRequest) -> Iterator[str]:
    """A database with no tables; its URL as `postgresql://user@host:port/name`."""
    request.getfixturevalue("postgres_template")  # skips or fails like the other tests
    yield from _postgres_database(None)


def multi_host(url: str, form: str) -> str:
    """`url` (one host) spelled with a dead host first, in each multi-host form."""
    parsed = make_url(url)
    user, live, name = parsed.username, f"{parsed.host}:{parsed.port or 5432}", parsed.database
    if form == "libpq":
        return f"postgresql://{user}@{CLOSED},{live}/{name}"
    if form == "sqlalchemy":
        return f"postgresql://{user}@/{name}?host={CLOSED}&host={live}"
    if form == "comma":
        host, port = live.split(":")
        return f"postgresql://{user}@/{name}?host=127.0.0.1,{host}&port=1,{port}"
    raise AssertionError(form)


FORMS = ["libpq", "sqlalchemy", "comma"]
ORDERS = "tests.apps.orders:inbox"


def tables(url: str) -> set[str]:
    store = Store(url, auto_migrate=False)
    try:
        with store.engine.connect() as connection:
            return set(sa.inspect(connection).get_table_names())
    finally:
        store.dispose()


@pytest.mark.parametrize("form", FORMS)
def test_migrate_accepts_every_multi_host_form(empty_pg: str, form: str) -> None:
    result = run_cli("migrate", "--database-url", multi_host(empty_pg, form), timeout=60)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "hookinbox_events" in tables(empty_pg)


@pytest.mark.parametrize("form", FORMS)
def test_every_multi_host_form_names_the_same_hosts(form: str) -> None:
    url = parse_url(multi_host("postgresql://u@127.0.0.1:5432/db", form))
    _, params = sa.create_engine(url).dialect.create_connect_args(url)
    assert (params["host"], str(params["port"])) == ("127.0.0.1,127.0.0.1", "1,5432")


def test_a_malformed_port_is_a_configuration_error_without_the_password() -> None:
    result = run_cli("migrate", "--database-url", "postgresql://u:s3cret@h:port/db")
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: not a database URL")
    assert "s3cret" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


# -- LISTEN on a multi-host URL ------------------------------------------------------------


@pytest.fixture
def pg_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh, migrated database."""
    yield from _postgres_database(request.getfixturevalue("postgres_template"))


@pytest.mark.parametrize("form", FORMS)
def test_listen_wakes_the_worker_on_every_multi_host_form(
    pg_url: str, form: str, caplog: pytest.LogCaptureFixture
) -> None:
    """With a 30 s poll, only NOTIFY can get the event processed within the 10 s wait."""
    orders_app.create_tables(pg_url)
    receiving, working = orders_app.build(pg_url), orders_app.build(multi_host(pg_url, form))
    with caplog.at_level(logging.WARNING, "hookinbox.worker"), running_worker(working, LONG_POLL):
        for number in range(2):
            deliver(receiving, number)
            wait_processed(working, f"evt_{number}")
    assert not [r for r in caplog.records if "LISTEN" in r.getMessage()]
    receiving.close()
    working.close()


@pytest.mark.parametrize("form", FORMS)
def test_the_pool_and_the_listener_connect_alike(pg_url: str, form: str) -> None:
    """Same hosts, same ports, and read-write sessions only, whichever form the URL takes."""
    store = Store(multi_host(pg_url, form))
    _, pool = store.engine.dialect.create_connect_args(store.engine.url)
    listener = store.dialect.listen_params(store.engine, store.options)
    for key in ("host", "port", "dbname", "user"):
        assert str(listener[key]) == str(pool[key])
    assert listener["target_session_attrs"] == pool["target_session_attrs"] == "read-write"
    store.dispose()


def test_an_explicit_target_session_attrs_is_kept(pg_url: str) -> None:
    store = Store(multi_host(pg_url, "comma") + "&target_session_attrs=any")
    assert store.dialect.listen_params(store.engine, store.options)["target_session_attrs"] == "any"
    assert store.engine.url.query["target_session_attrs"] == "any"
    store.dispose()


# -- the database's encoding ---------------------------------------------------------------


@pytest.fixture
def sql_ascii_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A throwaway SQL_ASCII database, as a cluster initialised under the C locale makes."""
    request.getfixturevalue("postgres_template")  # skips or fails like the other tests
    yield from _postgres_database(
        None, " ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
    )


def assert_encoding_refused(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "SQL_ASCII" in lines[0] and "UTF8" in lines[0]


def test_migrate_refuses_a_sql_ascii_database_in_one_line(sql_ascii_url: str) -> None:
    assert_encoding_refused(run_cli("migrate", "--database-url", sql_ascii_url, timeout=60))


@pytest.mark.parametrize("command", ["worker", "relay", "serve"])
def test_start_up_refuses_a_sql_ascii_database(sql_ascii_url: str, command: str) -> None:
    result = run_cli(command, ORDERS, "--database-url", sql_ascii_url, timeout=60)
    assert_encoding_refused(result)


def test_the_library_refuses_a_sql_ascii_database_as_a_configuration_error(
    sql_ascii_url: str,
) -> None:
    store = Store(sql_ascii_url)
    with pytest.raises(ConfigurationError, match=r"SQL_ASCII.*UTF8"):
        store.migrate()
    store.dispose()


# -- the LISTEN connection's back-off ------------------------------------------------------


def listening_pid(admin: sa.Engine, database: str, other_than: int | None = None) -> int | None:
    """The backend of a listener (its last statement was a LISTEN) other than `other_than`.

    The old one may still be listed after the listener gave it up: across a silent link the
    server side of it lives on until its own keepalives end it, so it must be skipped, not
    taken for the only one."""
    query = sa.text(
        "SELECT pid FROM pg_stat_activity WHERE datname = :db AND query LIKE 'LISTEN %'"
        " AND pid <> :other ORDER BY backend_start DESC"
    )
    with admin.connect() as connection:
        return connection.execute(query, {"db": database, "other": other_than or 0}).scalar()


def wait_listening(
    admin: sa.Engine, database: str, other_than: int | None, timeout: float | None = None
) -> int:
    timeout = RELISTEN_WAIT if timeout is None else timeout
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = listening_pid(admin, database, other_than)
        if pid is not None and pid != other_than:
            return pid
        time.sleep(0.05)
    raise AssertionError(f"the listener did not LISTEN again within {timeout} s")


RELISTEN_WAIT = 10.0
"""Far above the first back-off (0.5 s), far below the back-off after six outages in a row
(30 s): a listener whose back-off resets once it is listening again always comes back in time."""


def test_the_listen_back_off_resets_once_listening_again(pg_url: str) -> None:
    store, stop = Store(pg_url), threading.Event()
    database = make_url(pg_url).database
    assert database is not None
    listener = Listener(store, {Listener.EVENTS: threading.Event()}, stop)
    admin = _admin_engine()
    listener.start()
    try:
        pid = wait_listening(admin, database, None)
        for _ in range(7):  # an outage each time: the server ends the listener's session
            with admin.connect() as connection:
                connection.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
            pid = wait_listening(admin, database, pid)
    finally:
        stop.set()
        listener.join(timeout=5)
        admin.dispose()
        store.dispose()


# -- TCP timeouts ----------------------------------------------------------------------------


def libpq_parameters(store: Store) -> dict[str, str]:
    """What libpq was actually given for a pooled connection."""
    with store.engine.connect() as connection:
        raw = connection.connection.dbapi_connection
        assert raw is not None
        return dict(raw.info.get_parameters())  # type: ignore[attr-defined]


def test_tcp_timeouts_are_set_by_default_for_the_pool_and_the_listener(pg_url: str) -> None:
    store = Store(pg_url)
    expected = {"tcp_user_timeout": "10000", "keepalives_idle": "5", "keepalives_count": "3"}
    pool = libpq_parameters(store)
    assert {key: pool.get(key) for key in expected} == expected
    listener = store.dialect.listen_params(store.engine, store.options)
    assert {key: str(listener.get(key)) for key in expected} == expected
    store.dispose()


def test_tcp_timeouts_given_in_the_url_win_and_zero_turns_them_off(pg_url: str) -> None:
    store = Store(f"{pg_url}?tcp_user_timeout=2500&keepalives_idle=30")
    pool = libpq_parameters(store)
    assert (pool["tcp_user_timeout"], pool["keepalives_idle"]) == ("2500", "30")
    assert store.dialect.listen_params(store.engine, store.options)["tcp_user_timeout"] == "2500"
    store.dispose()
    store = Store(pg_url, StoreOptions(tcp_timeout=0))
    assert "tcp_user_timeout" not in libpq_parameters(store)
    store.dispose()


def test_libpqs_options_in_an_asyncpg_url_reach_the_server_as_settings(pg_url: str) -> None:
    """asyncpg has no `options` parameter (SQLAlchemy would pass it to asyncpg's connect() and
    fail): its `-c` settings are sent as asyncpg's server settings, as libpq sends them for
    the sync driver on the same URL; hookinbox's own application_name wins, as with libpq."""
    options = r"-c statement_timeout=4321 --lock-timeout=1234 -capplication_name=mine\ too"
    url = make_url(pg_url).update_query_dict({"options": options})
    async_url = url.set(drivername="postgresql+asyncpg").render_as_string(hide_password=False)
    inbox = Inbox(async_url)
    shown = ("statement_timeout", "lock_timeout", "application_name")

    async def settings() -> list[str]:
        astore = inbox._runtime.new_async_store()
        try:
            async with astore.engine.connect() as connection:
                return [
                    str((await connection.exec_driver_sql(f"SHOW {name}")).scalar())
                    for name in shown
                ]
        finally:
            await astore.dispose()  # its pool, on the loop that opened it
            await inbox.aclose()

    assert asyncio.run(settings()) == ["4321ms", "1234ms", "hookinbox"]
    sync = Store(url.render_as_string(hide_password=False))
    with sync.engine.connect() as connection:  # libpq's own options, on the same URL
        assert [connection.exec_driver_sql(f"SHOW {name}").scalar() for name in shown] == [
            "4321ms",
            "1234ms",
            "hookinbox",
        ]
    sync.dispose()


def test_a_server_switch_in_an_asyncpg_urls_options_is_refused_in_one_line() -> None:
    inbox = Inbox("postgresql+asyncpg://shop@127.0.0.1:1/shop?options=-B%2010")
    with pytest.raises(ConfigurationError) as refused:
        inbox._runtime.new_async_store()  # building its engine is what refuses
    assert "\n" not in str(refused.value) and "-c name=value" in str(refused.value)


# -- a read-only server --------------------------------------------------------------------


@pytest.fixture
def read_only(pg_url: str) -> Iterator[Callable[[bool], None]]:
    """Make the database read-only for new sessions (as a standby, or a primary demoted or
    guarded against a full disk is), and back; each switch ends the sessions open."""
    database = make_url(pg_url).database
    admin = _admin_engine()

    def switch(on: bool) -> None:
        with admin.connect() as connection:
            value = "on" if on else "off"
            connection.execute(
                sa.text(f'ALTER DATABASE "{database}" SET default_transaction_read_only = {value}')
            )
            connection.execute(
                sa.text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :db"
                ),
                {"db": database},
            )

    yield switch
    switch(False)
    admin.dispose()


def test_readyz_is_not_ready_while_the_database_is_read_only(
    pg_url: str, read_only: Callable[[bool], None]
) -> None:
    inbox = Inbox(pg_url)
    client = ASGIClient(inbox.asgi())
    assert client.get("/readyz").status_code == 200
    read_only(True)
    answer = client.get("/readyz")
    assert answer.status_code == 503, answer.text
    assert "read-only" in answer.text
    read_only(False)
    assert client.get("/readyz").status_code == 200
    inbox.close()


def test_a_write_refused_as_read_only_is_unavailable_and_drops_the_pool(
    pg_url: str, read_only: Callable[[bool], None]
) -> None:
    """A pooled session that lands on a read-only server (a demoted primary that came back as
    a standby) is answered 503, not 500; the pool is dropped, so the next sessions are opened
    afresh (with several hosts, on the new primary)."""
    store = Store(pg_url)
    store.ping()
    read_only(True)
    with pytest.raises(StoreUnavailable, match="read-only"):
        with store.transaction() as connection:
            connection.execute(sa.text("CREATE TABLE hookinbox_probe_test (x int)"))
    read_only(False)
    with store.transaction() as connection:
        connection.execute(sa.text("CREATE TABLE hookinbox_probe_test (x int)"))
    store.dispose()


class SilentAfterStartup:
    """A server that completes PostgreSQL's start-up (no TLS, no password) and then never
    answers a query, while its TCP stack acknowledges everything: a pooler or proxy that lost
    its own upstream. Neither connect_timeout nor TCP timeouts can see it."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            self.held.append(client)
            first = client.recv(8)
            if first[4:8] == b"\x04\xd2\x16\x2f":  # SSLRequest: no
                client.sendall(b"N")
                first = client.recv(4)
            length = int.from_bytes(first[:4], "big")
            while length - len(first) > 0:
                first += client.recv(length - len(first))
            # AuthenticationOk, then ReadyForQuery (idle); then silence.
            client.sendall(b"R\x00\x00\x00\x08\x00\x00\x00\x00" + b"Z\x00\x00\x00\x05I")

    def close(self) -> None:
        self.server.close()
        for held in self.held:
            held.close()


def test_a_listen_that_is_never_answered_is_given_up(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from hookinbox._storage import _notify

    monkeypatch.setattr(_notify, "SETUP_TIMEOUT", 0.5)
    silent = SilentAfterStartup()
    store = Store(f"postgresql://hookinbox@127.0.0.1:{silent.port}/inbox", auto_migrate=False)
    stop = threading.Event()
    listener = Listener(store, {Listener.EVENTS: threading.Event()}, stop)
    caplog.set_level(logging.WARNING, "hookinbox.worker")
    listener.start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(
            "LISTEN connection lost" in r.getMessage() for r in caplog.records
        ):
            time.sleep(0.05)
    finally:
        stop.set()
        listener.join(timeout=5)
        silent.close()
        store.dispose()
    assert any("LISTEN connection lost" in r.getMessage() for r in caplog.records)
    assert not listener.is_alive()
