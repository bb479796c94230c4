"""The encryption gateway (`Store.encryption`): rewriting stored bodies and headers under the
key that encrypts now (`hookinbox encryption rotate`), and checking at start-up that the keys
given read what is stored.

A rotation walks the events by id in batches, each its own short transaction, so it never
holds the writer for long and an interruption leaves every row whole: under the old key or the
new one, both of which the keyring holds until the rotation is done. A second run skips what
the first finished. A row is rewritten only if it is still as it was read (its body and
headers compared in the update), so an event changed meanwhile (its payload erased) is left
to the change, not put back.

The codec (`_payload_codec`) knows the formats; this module knows only where the values are.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import sqlalchemy as sa

from hookinbox._errors import ConfigurationError
from hookinbox._storage._payload_codec import (
    KEYS_ENV,
    encode_payload,
    key_id_of,
    keyring,
    payload_key_id,
    read_payload,
)
from hookinbox._storage._payload_packing import compression_level
from hookinbox._storage._schema import events, payloads

if TYPE_CHECKING:
    from hookinbox._storage._seam import StoreSeam

PLAIN = "(none)"
"""How a value stored in clear is counted."""

NEWEST_CHECKED = 1000
"""The start-up check looks for the newest encrypted event among this many newest events: an
index range, never a scan of the whole table."""

_HEAD = len(b"\xffhkx") + 2 + 32
"""Enough of a body to read its key id (format, the id's length, an id of up to 32)."""

_VALUES = (events.c.id, events.c.source, events.c.event_id, payloads.c.body, payloads.c.headers)
_WITH_PAYLOAD = events.join(payloads, payloads.c.id == events.c.id)
"""Events with a payload row (an erased event has none: nothing to rewrite)."""

_REWRITE = (
    payloads.update()
    .where(
        payloads.c.id == sa.bindparam("row_id"),
        payloads.c.body == sa.bindparam("old_body"),
        payloads.c.headers == sa.bindparam("old_headers"),
    )
    .values(body=sa.bindparam("new_body"), headers=sa.bindparam("new_headers"))
)


@dataclass
class RotationStep:
    """What one batch of a rotation read and did."""

    last_id: int | None
    """The last event id read; None when there was none left."""
    read: int = 0
    rewritten: int = 0
    changed: int = 0
    """Rows that changed between the read and the rewrite: left as they are."""
    keys: Counter[str] = field(default_factory=Counter)
    """The key id of each body read (`PLAIN` for one in clear), before the rewrite."""


class Encryption:
    def __init__(self, store: StoreSeam) -> None:
        self.store = store

    def rotate_batch(self, after: int, size: int, *, dry_run: bool = False) -> RotationStep:
        """Read the `size` events after id `after`; unless `dry_run`, rewrite those not
        wholly under the current key, in one transaction."""
        ring = keyring()
        if ring is None and not dry_run:
            raise ConfigurationError(f"{KEYS_ENV} is not set: no key to encrypt with")
        query = (
            sa.select(*_VALUES)
            .select_from(_WITH_PAYLOAD)
            .where(payloads.c.id > after)
            .order_by(payloads.c.id)
            .limit(size)
        )
        with self.store.reading() as connection:
            rows = connection.execute(query).all()
        step = RotationStep(rows[-1].id if rows else None, read=len(rows))
        step.keys.update(key_id_of(row.body) or PLAIN for row in rows)
        if dry_run or ring is None:
            return step
        rewrites: list[dict[str, object]] = []
        for row in rows:
            if payload_key_id(row.body, row.headers) == ring.current:
                continue
            # Rewritten in today's format (packed, compressed if HOOKINBOX_COMPRESSION says).
            body, headers = read_payload(row.body, row.headers, row.source, row.event_id)
            new_body, new_headers = encode_payload(body, headers, row.source, row.event_id)
            rewrites.append({
                "row_id": row.id,
                "old_body": bytes(row.body),
                "old_headers": row.headers,
                "new_body": new_body,
                "new_headers": new_headers,
            })  # fmt: skip
        if not rewrites:
            return step
        with self.store.transaction() as connection:
            for values in rewrites:
                if connection.execute(_REWRITE, values).rowcount == 1:
                    step.rewritten += 1
                else:
                    step.changed += 1
        return step

    def check_keys(self) -> None:
        """Raise `ConfigurationError` (one line, no key shown) when the keys given cannot read
        the newest encrypted event among the `NEWEST_CHECKED` newest, or are malformed, or
        when such an event is stored and no keys are given: a server that started so would
        answer deliveries and then fail on every event it reads."""
        ring = keyring()  # malformed: ConfigurationError here
        compression_level()  # as is HOOKINBOX_COMPRESSION
        head = sa.func.substr(payloads.c.body, 1, _HEAD)
        newest = (
            sa.select(payloads.c.id, head.label("head"))
            .order_by(payloads.c.id.desc())
            .limit(NEWEST_CHECKED)
        )
        with self.store.reading() as connection:
            found = next(
                (row for row in connection.execute(newest) if key_id_of(row.head) is not None),
                None,
            )
            if found is None:
                return
            by_id = sa.select(*_VALUES).select_from(_WITH_PAYLOAD).where(payloads.c.id == found.id)
            row = connection.execute(by_id).one()
        if ring is None:
            raise ConfigurationError(
                f"events are stored encrypted (event {row.source}/{row.event_id}, key "
                f"{key_id_of(row.body)!r}) and {KEYS_ENV} is not set"
            )
        read_payload(row.body, row.headers, row.source, row.event_id)
