"""What MariaDB does its own way, on the real server: the character set and the collation
checked at start-up, text that round-trips byte for byte, keys that differ only in case or
trailing spaces kept apart, a lock wait answered "unavailable", and the one-line refusals of a
server hookinbox cannot run on."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from hookinbox._errors import ConfigurationError, StoreUnavailable
from hookinbox._storage import Store
from hookinbox._storage._dialects._mysql._server import check_server
from hookinbox._storage._schema import events, payloads
from tests.storage.test_deliveries import delivery

on_mariadb = pytest.mark.parametrize("backend", ["mysql"])


@pytest.fixture
def latin1_url(backend: str, mysql_server: str) -> Iterator[str]:
    name = f"hookinbox_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(make_url(mysql_server).set(drivername="mysql+pymysql"))
    with admin.connect() as connection:
        connection.exec_driver_sql(f"CREATE DATABASE `{name}` CHARACTER SET latin1")
    try:
        yield make_url(mysql_server).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name}`")
        admin.dispose()


@on_mariadb
def test_a_connection_not_in_utf8mb4_is_refused_in_one_line(db_url: str) -> None:
    store = Store(db_url + "?charset=utf8")  # MariaDB's utf8 is utf8mb3: no emoji
    with pytest.raises(ConfigurationError) as refused:
        store.migrate()
    assert "utf8mb4" in str(refused.value) and "\n" not in str(refused.value)
    store.dispose()


@on_mariadb
def test_a_database_not_in_utf8mb4_is_refused_in_one_line(latin1_url: str) -> None:
    store = Store(latin1_url)
    with pytest.raises(ConfigurationError, match="character set latin1; hookinbox needs utf8mb4"):
        store.migrate()
    store.dispose()


@on_mariadb
def test_four_byte_characters_round_trip(store: Store) -> None:
    body = '{"name": "caf\u00e9 \U0001f600 \U00020000", "lone": "\\ud800"}'.encode()
    first = delivery(event_id="evt_\U0001f600", body=body, headers={"x-emoji": "\U0001f680"})
    assert store.ingest.record(first).is_new
    event = store.get_event("stripe", "evt_\U0001f600")
    assert event is not None
    with store.reading() as connection:
        row = connection.execute(
            sa.select(payloads.c.body, payloads.c.headers).where(payloads.c.id == event.row_id)
        ).one()
    assert row.body == body
    assert json.loads(row.headers) == {"x-emoji": "\U0001f680"}
    assert event.id == "evt_\U0001f600"


@on_mariadb
def test_keys_differing_in_case_or_trailing_spaces_are_different_events(store: Store) -> None:
    """hookinbox's tables compare bytes, whatever the database's default collation (here the
    server's, case-insensitive and padding)."""
    for event_id in ("evt_A", "evt_a", "evt_a ", "evt_\u00e1"):
        assert store.ingest.record(delivery(event_id=event_id)).is_new, event_id
    assert not store.ingest.record(delivery(event_id="evt_a")).is_new


@on_mariadb
def test_a_lock_wait_timeout_is_unavailable_not_an_error(store: Store) -> None:
    """A delivery stuck behind another transaction's row lock: 503 (retried), not 500."""
    store.ingest.record(delivery(event_id="evt_held"))

    @sa.event.listens_for(store.engine, "connect")
    def _short_waits(dbapi_connection: object, _record: object) -> None:
        with dbapi_connection.cursor() as cursor:  # type: ignore[attr-defined]
            cursor.execute("SET SESSION innodb_lock_wait_timeout = 1")

    store.engine.dispose()
    other = sa.create_engine(store.engine.url, poolclass=sa.NullPool)
    with other.connect() as holder, holder.begin():
        holder.execute(sa.update(events).where(events.c.event_id == "evt_held").values(attempts=0))
        with pytest.raises(StoreUnavailable, match="Lock wait timeout"):
            store.ingest.record(delivery(event_id="evt_held"))
    other.dispose()


@on_mariadb
def test_the_server_time_is_utc(store: Store) -> None:
    with store.reading() as connection:
        now = store.dialect.now(connection)
    assert abs((now - datetime.now(UTC)).total_seconds()) < 5


@on_mariadb
def test_long_columns_are_hookinbox_s_own_and_an_application_s_text_stays_text(
    store: Store,
) -> None:
    """A body or a payload longer than 64 KiB fits (LONGBLOB, LONGTEXT), while a table of the
    application in the same process keeps SQLAlchemy's TEXT and BLOB: the rule is hookinbox's
    columns', not every `Text`'s."""
    application = sa.Table(
        "shop_notes", sa.MetaData(), sa.Column("note", sa.Text), sa.Column("scan", sa.LargeBinary)
    )
    with store.engine.begin() as connection:
        application.create(connection)
        columns = {
            (str(table), str(column)): str(kind).upper()
            for table, column, kind in connection.exec_driver_sql(
                "SELECT table_name, column_name, data_type FROM information_schema.columns"
                " WHERE table_schema = DATABASE() AND column_name IN"
                " ('body', 'headers', 'payload', 'note', 'scan')"
            )
        }
    assert columns == {
        ("hookinbox_payloads", "body"): "LONGBLOB",
        ("hookinbox_payloads", "headers"): "LONGTEXT",
        ("hookinbox_outbox", "payload"): "LONGTEXT",
        ("shop_notes", "note"): "TEXT",
        ("shop_notes", "scan"): "BLOB",
    }


@pytest.mark.parametrize(
    ("version", "charsets", "packet", "said"),
    [
        ("8.0.36", ("utf8mb4", "utf8mb4"), 67108864, "MySQL 8.0.36; hookinbox needs MariaDB 10.6"),
        ("10.5.21-MariaDB", ("utf8mb4", "utf8mb4"), 16777216, "needs 10.6 or later"),
        ("10.11.6-MariaDB", ("utf8mb3", "utf8mb4"), 16777216, "character set is utf8mb3"),
        ("10.11.6-MariaDB", ("utf8mb4", "latin1"), 16777216, "character set latin1"),
        ("10.11.6-MariaDB", ("utf8mb4", "utf8mb4"), 1048576, "max_allowed_packet is 1048576"),
    ],
)
def test_a_server_hookinbox_cannot_run_on_is_refused_in_one_line(
    version: str, charsets: tuple[str, str], packet: int, said: str
) -> None:
    with pytest.raises(ConfigurationError, match=said) as refused:
        check_server(version, *charsets, "shop", packet)
    assert "\n" not in str(refused.value)
    check_server("10.11.6-MariaDB-0+deb12u1", "utf8mb4", "utf8mb4", "shop", 16777216)
