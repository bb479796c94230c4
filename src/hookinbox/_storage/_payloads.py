"""An event's payload (its body and the headers kept for audit): the values a
`hookinbox_payloads` row stores, and what a stored row reads as (schema 14).

These two functions are the only places where a payload's values meet the database: every
writer (a delivery's upsert, group commit's batches on each dialect, reconcile's insert) binds
what `stored_payload` returns, and every reader (events loaded for a worker, an operator, the
test kit) goes through `payload_of`. What the values are on disk (in clear, or encrypted at
rest under the operator's keys) is `_payload_codec`'s, called here and nowhere else on these
paths. Payload search reads the stored body in SQL (`Dialect.payload_value`), so with
encryption on it reads and decrypts the window's bodies in Python instead (`_operator.py`).
"""

from __future__ import annotations

import json
from typing import Any

from hookinbox._model import NewDelivery
from hookinbox._storage._payload_codec import read_body, read_headers, stored_body, stored_headers

headers_json = json.JSONEncoder(sort_keys=True).encode
"""`json.dumps(headers, sort_keys=True)` without a new encoder per call (which is what
`json.dumps` builds whenever it is given an option): a third of a saturated batch writer's
CPU is what it does per row."""

PAYLOAD_INSERT = "INSERT INTO hookinbox_payloads (id, body, headers) VALUES ({marks})"
"""A payload row in driver-level SQL (`{marks}`: the driver's three placeholders)."""


def stored_payload(delivery: NewDelivery) -> tuple[bytes, str]:
    """The (body, headers) a payload row stores for `delivery` (encrypted when keys are
    given, each value bound to the delivery's source and event id)."""
    return stored_body(delivery), stored_headers(delivery, headers_json(delivery.headers))


def payload_of(body: Any, headers: Any, source: str, event_id: str) -> tuple[bytes, dict[str, str]]:
    """An event's body and headers from its payload row's columns; an event without a row
    (none written, or erased) reads an empty body and no headers. A value no key given
    decrypts raises `ConfigurationError` (`_payload_codec`), never reads as garbage."""
    if body is None:
        return b"", {}
    return read_body(body, source, event_id), json.loads(read_headers(headers, source, event_id))
