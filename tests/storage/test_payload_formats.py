"""Stored payloads in every format, on each database: in clear, compressed, encrypted, both;
rows written by the previous release (field-by-field encryption) still read; payload search
and erasure by a payload value find compressed rows; a corrupt value is a clear error."""

from __future__ import annotations

import base64
import os
import zlib

import pytest
import sqlalchemy as sa
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from hookinbox._errors import ConfigurationError
from hookinbox._records import EventFilter, Selection, search_for
from hookinbox._storage import Store
from hookinbox._storage._payload_codec import BUNDLED, KEYS_ENV, MAGIC, payload_key_id
from hookinbox._storage._payload_packing import COMPRESSION_ENV
from hookinbox._storage._payloads import headers_json
from hookinbox._storage._schema import events, payloads
from tests.storage.test_encryption import K1, delivery, raw, store_all

KEY = b"1" * 32  # K1's

FORMATS = {
    "clear": {},
    "compressed": {COMPRESSION_ENV: "zlib"},
    "encrypted": {KEYS_ENV: K1},
    "compressed+encrypted": {COMPRESSION_ENV: "zlib:6", KEYS_ENV: K1},
}


def use(monkeypatch: pytest.MonkeyPatch, settings: dict[str, str]) -> None:
    for name in (COMPRESSION_ENV, KEYS_ENV):
        if name in settings:
            monkeypatch.setenv(name, settings[name])
        else:
            monkeypatch.delenv(name, raising=False)


def put(store: Store, event_id: str, body: bytes, headers: str) -> None:
    """Overwrite an event's stored payload with raw column values."""
    with store.transaction() as connection:
        row = sa.select(events.c.id).where(events.c.event_id == event_id).scalar_subquery()
        statement = payloads.update().where(payloads.c.id == row)
        connection.execute(statement.values(body=body, headers=headers))


@pytest.mark.parametrize("name", list(FORMATS))
def test_every_format_round_trips_through_every_writer(
    store: Store, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    use(monkeypatch, FORMATS[name])
    items = [delivery(f"evt_{n}", n, body=b'{"pad": "%s"}' % (b"abc" * 200)) for n in range(5)]
    store_all(store, items)
    stored = raw(store)
    for item in items:
        body, headers = stored[item.event_id]
        if name == "clear":
            assert (body, headers) == (item.body, headers_json(item.headers))
            continue
        assert headers == BUNDLED and body.startswith(MAGIC) and b"abcabc" not in body
        assert payload_key_id(body, headers) == ("k1" if KEYS_ENV in FORMATS[name] else None)
        if "compressed" in name:
            assert len(body) < len(item.body) // 2  # the headers are in it too
    use(monkeypatch, {KEYS_ENV: K1})  # a reader needs the keys, never the compression setting
    for item in items:
        event = store.get_event("stripe", item.event_id)
        assert event is not None and (event.body, event.headers) == (item.body, item.headers)
    assert [e.body for e in store.operator.all_events()] == [i.body for i in items]


def test_a_body_compressing_does_not_shrink_is_kept_in_clear(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    use(monkeypatch, FORMATS["compressed"])
    noise = os.urandom(300)
    tricky = MAGIC + b"\x02" + noise  # starts as a packed value does: stored escaped
    store.ingest.record(delivery("evt_noise", body=noise))
    store.ingest.record(delivery("evt_tricky", body=tricky))
    assert raw(store)["evt_noise"][0] == noise
    assert raw(store)["evt_tricky"][0] == MAGIC + b"\x00" + tricky
    for event_id, body in (("evt_noise", noise), ("evt_tricky", tricky)):
        event = store.get_event("stripe", event_id)
        assert event is not None and event.body == body


def _sealed_field(value: bytes, field: bytes, event_id: str) -> bytes:
    """A value as the previous release encrypted one field (`\\x01`, key id, nonce, sealed),
    written here by hand, not by the code under test."""
    nonce = os.urandom(12)
    aad = b"hookinbox/1/%s/6:stripe/%s" % (field, event_id.encode())
    return MAGIC + b"\x01\x02k1" + nonce + AESGCM(KEY).encrypt(nonce, value, aad)


def test_rows_of_the_previous_format_still_read_and_rotate_into_the_new_one(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    use(monkeypatch, FORMATS["compressed+encrypted"])
    items = [delivery(f"evt_{n}", n) for n in range(3)]
    store_all(store, items)
    for item in items:
        sealed_headers = _sealed_field(
            headers_json(item.headers).encode(), b"headers", item.event_id
        )
        put(
            store,
            item.event_id,
            _sealed_field(item.body, b"body", item.event_id),
            "~" + base64.b64encode(sealed_headers).decode(),
        )
    for item in items:
        event = store.get_event("stripe", item.event_id)
        assert event is not None and (event.body, event.headers) == (item.body, item.headers)
    found = store.operator.list_events(EventFilter(), 10, payload=search_for("id", "evt_1"))
    assert [row["event_id"] for row in found] == ["evt_1"]
    use(monkeypatch, {KEYS_ENV: f"k2:{base64.b64encode(b'2' * 32).decode()},{K1}"})
    rewritten, after = 0, 0
    while (step := store.encryption.rotate_batch(after, 2)).last_id is not None:
        rewritten, after = rewritten + step.rewritten, step.last_id
    assert rewritten == 3
    assert {payload_key_id(*stored) for stored in raw(store).values()} == {"k2"}
    assert {headers for _, headers in raw(store).values()} == {BUNDLED}
    for item in items:
        event = store.get_event("stripe", item.event_id)
        assert event is not None and (event.body, event.headers) == (item.body, item.headers)


@pytest.mark.parametrize("name", ["compressed", "compressed+encrypted"])
def test_search_and_erasure_by_value_find_compressed_rows(
    store: Store, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    use(monkeypatch, {})
    store_all(store, [delivery(f"evt_{n}", n) for n in range(0, 9, 2)])  # in clear
    use(monkeypatch, FORMATS[name])
    store_all(store, [delivery(f"evt_{n}", n) for n in range(1, 9, 2)])  # coded
    search = search_for("data.object.customer", "cus_1")
    expected = ["evt_7", "evt_4", "evt_1"]  # newest first, clear and coded rows together
    assert [
        r["event_id"] for r in store.operator.list_events(EventFilter(), 50, payload=search)
    ] == expected
    if name == "compressed":  # compression turned off since: the coded rows are still found
        use(monkeypatch, {})
        listed = store.operator.list_events(EventFilter(), 50, payload=search)
        assert [r["event_id"] for r in listed] == expected
        assert [
            r["event_id"] for r in store.operator.list_events(EventFilter(), 2, payload=search)
        ] == expected[:2]
    read, matching = store.erasure.candidates(
        Selection("stripe", payload=search), after=0, batch_size=100
    )
    with store.engine.connect() as connection:
        ids = {
            r.event_id: r.id for r in connection.execute(sa.select(events.c.event_id, events.c.id))
        }
    assert matching == sorted(ids[e] for e in expected) and len(read) == 9


def test_a_corrupt_stored_value_is_a_clear_error_not_garbage(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    use(monkeypatch, FORMATS["compressed"])
    item = delivery("evt_1")
    store.ingest.record(item)
    good, headers = raw(store)["evt_1"]
    packed = zlib.compress(b"\x00\x00\x00\x02{}" + item.body)
    flipped = good[:-3] + bytes([good[-3] ^ 0x40]) + good[-2:]
    cases = [
        (flipped, headers, "its stored payload does not decompress"),
        (good[:20], headers, "its stored payload does not decompress"),
        (MAGIC + b"\x02\x07" + packed, headers, "has an unknown packing"),
        (MAGIC + b"\x02\x01" + zlib.compress(b"\x00\x00\x01\x00{}"), headers, "is cut short"),
        (MAGIC + b"\x09", headers, "has an unknown format"),
        (item.body, BUNDLED, "headers are kept in a body that holds none"),
    ]
    for body, stored_headers, error in cases:
        put(store, "evt_1", body, stored_headers)
        with pytest.raises(ConfigurationError, match=f"event stripe/evt_1: .*{error}"):
            store.get_event("stripe", "evt_1")
    use(monkeypatch, FORMATS["compressed+encrypted"])
    store.ingest.record(delivery("evt_2"))
    sealed, headers = raw(store)["evt_2"]
    put(store, "evt_2", sealed[:-1] + bytes([sealed[-1] ^ 1]), headers)
    with pytest.raises(ConfigurationError, match="evt_2: its stored payload does not decrypt"):
        store.get_event("stripe", "evt_2")


@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.parametrize("value", ["gzip", "zlib:0", "zlib:10", "zlib:x", "on"])
def test_a_malformed_compression_setting_is_one_line(
    store: Store, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(COMPRESSION_ENV, value)
    with pytest.raises(ConfigurationError, match="not 'off', 'zlib' or 'zlib:LEVEL'") as raised:
        store.encryption.check_keys()  # what serve and worker run at start-up
    assert "\n" not in str(raised.value)
    with pytest.raises(ConfigurationError):
        store.ingest.record(delivery("evt_1"))
