"""An event's payload (its body and the headers kept for audit): the values a
`hookinbox_payloads` row stores, and what a stored row reads as (schema 14).

These two functions are the only places where a payload's values meet the database: every
writer (a delivery's upsert, group commit's batches on each dialect, reconcile's insert) binds
what `stored_payload` returns, and every reader (events loaded for a worker, an operator, the
test kit) goes through `payload_of`. What the values are on disk (in clear, or compressed
and/or encrypted at rest) is `_payload_codec`'s, called here and nowhere else on these paths.
Payload search reads a body stored in clear in SQL (`Dialect.payload_value`), and reads a
coded one (compressed or encrypted) in Python (`_operator.py`).
"""

from __future__ import annotations

import json
from typing import Any

from hookinbox._model import NewDelivery
from hookinbox._storage._payload_codec import encode_payload, read_payload

headers_json = json.JSONEncoder(sort_keys=True).encode
"""`json.dumps(headers, sort_keys=True)` without a new encoder per call (which is what
`json.dumps` builds whenever it is given an option): a third of a saturated batch writer's
CPU is what it does per row."""

PAYLOAD_INSERT = "INSERT INTO hookinbox_payloads (id, body, headers) VALUES ({marks})"
"""A payload row in driver-level SQL (`{marks}`: the driver's three placeholders)."""


def stored_payload(delivery: NewDelivery) -> tuple[bytes, str]:
    """The (body, headers) a payload row stores for `delivery` (packed, compressed and
    encrypted as `HOOKINBOX_COMPRESSION` and `HOOKINBOX_ENCRYPTION_KEYS` say)."""
    headers = headers_json(delivery.headers)
    return encode_payload(delivery.body, headers, delivery.source, delivery.event_id)


def payload_of(body: Any, headers: Any, source: str, event_id: str) -> tuple[bytes, dict[str, str]]:
    """An event's body and headers from its payload row's columns; an event without a row
    (none written, or erased) reads an empty body and no headers. A value no key given
    decrypts raises `ConfigurationError` (`_payload_codec`), never reads as garbage."""
    if body is None:
        return b"", {}
    body, headers = read_payload(body, headers, source, event_id)
    return body, json.loads(headers)
