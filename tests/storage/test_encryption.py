"""Encryption at rest on each database: what is stored is ciphertext, what is read is the
delivery; keys rotate; a value no key given decrypts is a clear error, never garbage."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from hookinbox._errors import ConfigurationError
from hookinbox._model import NewDelivery
from hookinbox._records import EventFilter, search_for
from hookinbox._storage import Store
from hookinbox._storage._payload_codec import BUNDLED, KEYS_ENV, MAGIC, key_id_of, payload_key_id
from hookinbox._storage._schema import events, payloads

START = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
K1 = "k1:" + base64.b64encode(b"1" * 32).decode()
K2 = "k2:" + base64.b64encode(b"2" * 32).decode()
K1_OTHER = "k1:" + base64.b64encode(b"x" * 32).decode()


def delivery(event_id: str, n: int = 0, body: bytes | None = None) -> NewDelivery:
    body = (
        body
        if body is not None
        else json.dumps({"id": event_id, "data": {"object": {"customer": f"cus_{n % 3}"}}}).encode()
    )
    return NewDelivery(
        source="stripe",
        event_id=event_id,
        event_type="invoice.paid",
        occurred_at=None,
        received_at=START + timedelta(seconds=n),
        body=body,
        headers={"stripe-signature": f"t={n},v1=secretish", "content-type": "application/json"},
        body_sha256=hashlib.sha256(body).hexdigest(),
    )


def raw(store: Store) -> dict[str, tuple[bytes, str]]:
    """Each event's body and headers as the database holds them."""
    query = sa.select(events.c.event_id, payloads.c.body, payloads.c.headers).join_from(
        events, payloads, payloads.c.id == events.c.id
    )
    with store.engine.connect() as connection:
        return {r.event_id: (bytes(r.body), r.headers) for r in connection.execute(query)}


def store_all(store: Store, items: list[NewDelivery]) -> None:
    """Through every writer: one delivery, a group-commit batch, reconcile's insert."""
    store.ingest.record(items[0])
    with store.transaction() as connection:
        store.ingest.record_batch(connection, items[1:-1])
    store.ingest.record_reconciled(items[-1:])


def rotate(store: Store, size: int = 3) -> int:
    rewritten, after = 0, 0
    while (step := store.encryption.rotate_batch(after, size)).last_id is not None:
        rewritten, after = rewritten + step.rewritten, step.last_id
    return rewritten


def test_what_is_stored_is_ciphertext_and_what_is_read_is_the_delivery(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEYS_ENV, K1)
    items = [delivery(f"evt_{n}", n) for n in range(6)]
    store_all(store, items)
    for item in items:
        body, headers = raw(store)[item.event_id]
        assert item.body not in body and b"cus_" not in body
        assert key_id_of(body) == payload_key_id(body, headers) == "k1" and headers == BUNDLED
        assert "secretish" not in headers and "stripe-signature" not in headers
        event = store.get_event("stripe", item.event_id)
        assert event is not None
        assert (event.body, event.headers) == (item.body, item.headers)
    assert [e.body for e in store.operator.all_events()] == [i.body for i in items]


def test_rows_stored_in_clear_still_read_with_encryption_on(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEYS_ENV, raising=False)
    # A body that starts as an encrypted one does is stored escaped, and reads as it came.
    tricky = delivery("evt_magic", 1, body=MAGIC + b"\x01\x02k1" + b"\x00" * 40)
    store.ingest.record(delivery("evt_plain"))
    store.ingest.record(tricky)
    assert raw(store)["evt_plain"][0] == delivery("evt_plain").body
    monkeypatch.setenv(KEYS_ENV, K1)
    store.ingest.record(delivery("evt_new", 2))
    for item in (delivery("evt_plain"), tricky, delivery("evt_new", 2)):
        event = store.get_event("stripe", item.event_id)
        assert event is not None and event.body == item.body
    assert key_id_of(raw(store)["evt_new"][0]) == "k1"


def test_a_value_moved_to_another_event_does_not_decrypt(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEYS_ENV, K1)
    store.ingest.record(delivery("evt_a"))
    store.ingest.record(delivery("evt_b"))
    moved = raw(store)["evt_a"][0]
    with store.transaction() as connection:
        evt_b = sa.select(events.c.id).where(events.c.event_id == "evt_b").scalar_subquery()
        connection.execute(payloads.update().where(payloads.c.id == evt_b).values(body=moved))
    with pytest.raises(ConfigurationError, match="evt_b: its stored payload does not decrypt"):
        store.get_event("stripe", "evt_b")
    assert store.get_event("stripe", "evt_a") is not None


def test_a_key_id_the_keys_do_not_hold_is_a_clear_error(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEYS_ENV, K1)
    store.ingest.record(delivery("evt_1"))
    monkeypatch.setenv(KEYS_ENV, K2)
    with pytest.raises(ConfigurationError, match="key 'k1', which HOOKINBOX_ENCRYPTION_KEYS"):
        store.get_event("stripe", "evt_1")
    monkeypatch.delenv(KEYS_ENV)
    with pytest.raises(ConfigurationError, match="HOOKINBOX_ENCRYPTION_KEYS is not set"):
        store.get_event("stripe", "evt_1")
    monkeypatch.setenv(KEYS_ENV, K1_OTHER)  # another key under the same id
    with pytest.raises(ConfigurationError, match="does not decrypt with key 'k1'"):
        store.get_event("stripe", "evt_1")


def test_a_rotation_puts_every_row_under_the_new_key_and_a_second_run_does_nothing(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEYS_ENV, raising=False)
    items = [delivery(f"evt_{n}", n) for n in range(10)]
    store_all(store, items[:4])  # in clear
    monkeypatch.setenv(KEYS_ENV, K1)
    store_all(store, items[4:])  # under k1
    monkeypatch.delenv(KEYS_ENV)  # a dry run counts without keys
    assert store.encryption.rotate_batch(0, 100, dry_run=True).keys == {"(none)": 4, "k1": 6}
    with pytest.raises(ConfigurationError, match="not set: no key to encrypt with"):
        store.encryption.rotate_batch(0, 100)
    monkeypatch.setenv(KEYS_ENV, f"{K2},{K1}")
    dry = store.encryption.rotate_batch(0, 100, dry_run=True)
    assert dry.keys == {"(none)": 4, "k1": 6} and dry.rewritten == 0
    assert rotate(store) == 10
    stored = raw(store)
    assert {payload_key_id(b, h) for b, h in stored.values()} == {"k2"}
    assert rotate(store) == 0
    monkeypatch.setenv(KEYS_ENV, K2)  # k1 retired: every event still reads
    for item in items:
        event = store.get_event("stripe", item.event_id)
        assert event is not None and (event.body, event.headers) == (item.body, item.headers)


def test_payload_search_finds_the_same_events_encrypted_as_in_clear(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEYS_ENV, raising=False)
    store_all(store, [delivery(f"evt_{n}", n) for n in range(9)])
    search = search_for("data.object.customer", "cus_1")
    in_clear = store.operator.list_events(EventFilter(), 50, payload=search)
    monkeypatch.setenv(KEYS_ENV, K1)
    rotate(store)
    encrypted = store.operator.list_events(EventFilter(), 50, payload=search)
    assert [r["event_id"] for r in in_clear] == ["evt_7", "evt_4", "evt_1"]
    assert [r["event_id"] for r in encrypted] == ["evt_7", "evt_4", "evt_1"]
    assert store.operator.list_events(EventFilter(), 2, payload=search)[-1]["event_id"] == "evt_4"


def test_the_start_up_check_refuses_keys_that_cannot_read_the_newest_encrypted_event(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEYS_ENV, raising=False)
    store.encryption.check_keys()  # nothing stored: nothing to refuse
    monkeypatch.setenv(KEYS_ENV, K1)
    store.ingest.record(delivery("evt_1"))
    store.encryption.check_keys()
    monkeypatch.setenv(KEYS_ENV, K1_OTHER)
    with pytest.raises(ConfigurationError, match="does not decrypt with key 'k1'"):
        store.encryption.check_keys()
    monkeypatch.delenv(KEYS_ENV)
    with pytest.raises(ConfigurationError, match=r"stored encrypted .*key 'k1'.* not set"):
        store.encryption.check_keys()
    monkeypatch.setenv(KEYS_ENV, "k1:tooshort")
    with pytest.raises(ConfigurationError, match=r"entry 1 .'k1'.: the key is 6 bytes, not 32"):
        store.encryption.check_keys()


@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("k1", "entry 1 is not ID:BASE64KEY"),
        (f"{K1},{K1}", "entry 2: key id 'k1' is given twice"),
        ("k1:" + base64.b64encode(b"1" * 16).decode(), "16 bytes, not 32"),
        ("bad id:" + base64.b64encode(b"1" * 32).decode(), "entry 1 is not ID:BASE64KEY"),
        ("k1:***", "not base64"),
    ],
)
def test_a_malformed_key_variable_is_one_line_without_the_key(
    store: Store, monkeypatch: pytest.MonkeyPatch, value: str, error: str
) -> None:
    monkeypatch.setenv(KEYS_ENV, value)
    with pytest.raises(ConfigurationError, match=error) as raised:
        store.ingest.record(delivery("evt_1"))
    key = value.partition(":")[2]
    assert not key or key not in str(raised.value)
    assert "\n" not in str(raised.value)


def test_the_key_variable_is_read_as_it_is_now(monkeypatch: pytest.MonkeyPatch) -> None:
    """A url-safe key reads as the standard form of the same bytes."""
    from hookinbox._storage._payload_codec import keyring

    key = os.urandom(32)
    monkeypatch.setenv(KEYS_ENV, "a:" + base64.urlsafe_b64encode(key).decode())
    first = keyring()
    monkeypatch.setenv(KEYS_ENV, "a:" + base64.b64encode(key).decode())
    second = keyring()
    assert first is not None and second is not None
    nonce = b"\x00" * 12
    sealed = first.ciphers["a"].encrypt(nonce, b"x", None)
    assert second.ciphers["a"].decrypt(nonce, sealed, None) == b"x"


def test_a_leased_event_no_key_decrypts_is_logged_and_the_rest_of_its_batch_is_leased(
    store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(KEYS_ENV, K1)
    store.ingest.record(delivery("evt_old"))
    monkeypatch.setenv(KEYS_ENV, K2)  # k1 dropped before a rotation ended
    store.ingest.record(delivery("evt_new", 1))
    now = START + timedelta(hours=1)
    lease = store.events.lease(limit=10, now=now, until=now + timedelta(minutes=1))
    assert [leased.event.id for leased in lease.fresh] == ["evt_new"]
    assert "evt_old: its stored payload is encrypted with key 'k1'" in caplog.text
