"""Payload search (issue 24, item 4): the same answers on SQLite (`json_extract`) and
PostgreSQL (`jsonb`), form bodies skipped, and the path and value never SQL."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from hookinbox._model import NewDelivery
from hookinbox._records import EventFilter, search_for
from hookinbox._storage import Store
from hookinbox._storage._schema import events

BODIES: dict[str, bytes] = {
    "evt_card": json.dumps({"data": {"object": {"customer": "cus_1", "paid": True,
                                                "amount": 1500}}}).encode(),
    "evt_list": json.dumps({"items": [{"sku": "A-1"}, {"sku": "B-2"}],
                            "data": {"object": {"customer": "cus_2"}}}).encode(),
    "evt_form": b"MessageSid=SM1&From=%2B15550100&data=cus_1",  # Twilio: a form, not JSON
    "evt_empty": b"",
    "evt_quote": json.dumps({"note": "' OR 1=1 --"}).encode(),
}  # fmt: skip


def stored(store: Store, bodies: dict[str, bytes]) -> Store:
    """Each body as an event of its own, received a second apart, oldest first."""
    start = datetime.now(UTC) - timedelta(minutes=10)
    for offset, (event_id, body) in enumerate(bodies.items()):
        store.ingest.record(
            NewDelivery(
                source="stripe", event_id=event_id, event_type="t", occurred_at=None,
                received_at=start + timedelta(seconds=offset), body=body, headers={},
                body_sha256=hashlib.sha256(body).hexdigest(),
            )
        )  # fmt: skip
    return store


@pytest.fixture
def searched(store: Store) -> Store:
    return stored(store, BODIES)


def found(store: Store, path: str, value: str) -> list[str]:
    rows = store.operator.list_events(EventFilter(), 50, payload=search_for(path, value))
    return sorted(row["event_id"] for row in rows)


def test_a_json_path_finds_the_same_events_on_both_databases(searched: Store) -> None:
    assert found(searched, "data.object.customer", "cus_1") == ["evt_card"]
    assert found(searched, "$.data.object.customer", "cus_2") == ["evt_list"]
    assert found(searched, "items.1.sku", "B-2") == ["evt_list"]  # an array index
    assert found(searched, "data.object.paid", "true") == ["evt_card"]  # as jsonb's #>> reads
    assert found(searched, "data.object.amount", "1500") == ["evt_card"]
    assert found(searched, "data", "cus_1") == []  # the form's field is not a JSON path
    assert found(searched, "note", "' OR 1=1 --") == ["evt_quote"]  # a value is data
    assert found(searched, "data.object.customer", "cus_1' OR '1'='1") == []
    with searched.reading() as connection:
        assert connection.execute(sa.select(sa.func.count()).select_from(events)).scalar() == 5


@pytest.mark.parametrize(
    "path",
    ["", "a..b", "data'); DROP TABLE hookinbox_events; --", 'a"b', "a.b.c.d.e.f.g.h.i", "x" * 65],
)
def test_a_path_that_is_not_plain_segments_is_refused(path: str) -> None:
    with pytest.raises(ValueError, match="payload path"):
        search_for(path, "x")  # before any SQL is built


def test_a_search_is_bounded_to_the_newest_events(
    searched: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("hookinbox._storage._operator.SCAN_LIMIT", 2)  # the two newest
    assert found(searched, "data.object.customer", "cus_1") == []  # evt_card is older
    assert found(searched, "note", "' OR 1=1 --") == ["evt_quote"]


CUSTOMER = {"data": {"object": {"customer": "cus_1"}}}
HOSTILE: dict[str, bytes] = {
    "evt_nul": b'{"note": "a\\u0000b", "data": {"object": {"customer": "cus_1"}}}',
    "evt_lone": b'{"note": "\\ud800", "data": {"object": {"customer": "cus_1"}}}',
    "evt_low": b'{"note": "\\udc00\\ud800", "data": {"object": {"customer": "cus_1"}}}',
    "evt_nan": b'{"amount": NaN, "data": {"object": {"customer": "cus_1"}}}',
    "evt_inf": b'[{"amount": -Infinity}, {"data": {"object": {"customer": "cus_1"}}}]',
    "evt_exp": b'{"amount": 1e1000000, "data": {"object": {"customer": "cus_1"}}}',
    "evt_utf16": json.dumps(CUSTOMER).encode("utf-16"),
    "evt_utf16le": json.dumps(CUSTOMER).encode("utf-16-le"),
    "evt_utf32be": json.dumps(CUSTOMER).encode("utf-32-be"),
}
"""Bodies a source's parser accepted (Python reads each) that PostgreSQL's jsonb refuses."""
ORDINARY: dict[str, bytes] = {
    "evt_plain": json.dumps(CUSTOMER).encode(),
    "evt_pair": b'{"note": "\\ud83d\\ude00", "data": {"object": {"customer": "cus_1"}}}',
    "evt_escaped": b'{"note": "\\\\u0000 \\\\ud800 NaN Infinity 1e1000000", '
    b'"data": {"object": {"customer": "cus_1"}}}',
}
"""Bodies that look like the hostile ones and are ordinary JSON: a surrogate pair (as
`json.dumps` writes an emoji), and the hostile texts inside a string, escaped."""


def test_no_stored_body_breaks_a_search(store: Store) -> None:
    """Issue 31, item 4: one of these bodies in a search's window made every search 500 on
    PostgreSQL; the search now skips the bodies jsonb cannot read and finds the others."""
    stored(store, {**HOSTILE, **ORDINARY})
    for body in HOSTILE.values():
        json.loads(body)  # every one passed a source's parser

    hits = found(store, "data.object.customer", "cus_1")
    if store.dialect == "postgresql":
        assert hits == sorted(ORDINARY)
    else:  # SQLite's JSON functions read some of them (a lone surrogate, NaN): found too
        assert set(ORDINARY) <= set(hits) and "evt_utf16" not in hits
    assert found(store, "note", "\U0001f600") == ["evt_pair"]
    assert found(store, "1.data.object.customer", "cus_1") == []


REPEATED: dict[str, bytes] = {
    "evt_twice": b'{"status": "pending", "status": "paid"}',
    "evt_thrice": b'{"status": "a", "status": "b", "status": "paid"}',
    "evt_nested": b'{"data": {"customer": "cus_old", "customer": "cus_new"}}',
    "evt_outer": b'{"data": {"customer": "cus_old"}, "data": {"customer": "cus_new"}}',
    "evt_gone": b'{"data": {"customer": "cus_old"}, "data": {"other": 1}}',
    "evt_items": b'{"items": [{"sku": "OLD"}], "items": [{"sku": "NEW"}]}',
    "evt_flag": b'{"paid": false, "paid": true}',
    "evt_amount": b'{"amount": 1, "amount": 1500}',
    "evt_other": b'{"note": 1, "note": 2, "status": "paid"}',
    "evt_no_list": b'{"items": {"sku": "OLD"}}',
}
"""Bodies with a key twice (or three times) in one object: valid JSON, which Python's parser
(every source's, and `event.payload`) reads keeping the last value."""


def test_a_repeated_key_is_searched_as_the_handler_reads_it(store: Store) -> None:
    """Issue 45, item 8: `{"a":1,"a":2}` is 2 to a handler (Python keeps the last) and to
    PostgreSQL's jsonb; MariaDB's and SQLite's JSON functions read the first. The search now
    finds what the handler sees, on every database, and never the value the handler does
    not see."""
    stored(store, REPEATED)
    for event_id, body in REPEATED.items():  # the handler's view: the last value
        event = store.ingest.get_event("stripe", event_id)
        assert event is not None and event.payload == json.loads(body)

    assert found(store, "status", "paid") == ["evt_other", "evt_thrice", "evt_twice"]
    assert found(store, "status", "pending") == []
    assert found(store, "status", "a") == []
    assert found(store, "data.customer", "cus_new") == ["evt_nested", "evt_outer"]
    assert found(store, "data.customer", "cus_old") == []
    assert found(store, "data.other", "1") == ["evt_gone"]
    assert found(store, "items.0.sku", "NEW") == ["evt_items"]
    assert found(store, "items.0.sku", "OLD") == []  # nor an object's member as an item
    assert found(store, "paid", "true") == ["evt_flag"]
    assert found(store, "paid", "false") == []
    assert found(store, "amount", "1500") == ["evt_amount"]
    assert found(store, "amount", "1") == []
    assert found(store, "note", "2") == ["evt_other"]


def test_bodies_read_otherwise_do_not_shorten_a_page(store: Store) -> None:
    """A page holds `limit` matches when there are that many: the newest bodies, whose
    first value matched but whose last does not, do not take a page's places."""
    bodies = {f"evt_match_{n}": b'{"status": "paid"}' for n in range(3)}
    bodies |= {f"evt_first_{n}": b'{"status": "paid", "status": "void"}' for n in range(4)}
    stored(store, bodies)  # the four that only look like matches are the newest
    search = search_for("status", "paid")
    first = store.operator.list_events(EventFilter(), 2, payload=search)
    assert [row["event_id"] for row in first] == ["evt_match_2", "evt_match_1"]
    last = first[-1]
    rest = store.operator.list_events(
        EventFilter(), 2, payload=search, before=(last["received_at"], last["id"])
    )
    assert [row["event_id"] for row in rest] == ["evt_match_0"]
