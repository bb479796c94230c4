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


@pytest.fixture
def searched(store: Store) -> Store:
    start = datetime.now(UTC) - timedelta(minutes=10)
    for offset, (event_id, body) in enumerate(BODIES.items()):
        store.ingest.record(
            NewDelivery(
                source="stripe", event_id=event_id, event_type="t", occurred_at=None,
                received_at=start + timedelta(seconds=offset), body=body, headers={},
                body_sha256=hashlib.sha256(body).hexdigest(),
            )
        )  # fmt: skip
    return store


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
