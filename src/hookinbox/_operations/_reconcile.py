"""Reconcile: store the events a provider's API lists that no webhook delivered, or ask the
provider to deliver them again where its API lists deliveries without their events (GitHub:
nothing unsigned is stored; the redelivery is verified as usual).

Each listed event is counted once, in this order: a type no handler takes is `skipped_types`
(never stored); one already in the inbox is `already_stored` (also when a webhook stored it
a moment before our insert: the insert decides, `Ingest.record_reconciled`); the rest are
`missing`, and `stored` when this run stored them (none with `dry_run`). It is stored under
the key a webhook of it would have had: the source's own `identify`, on the event's JSON as
the API gives it (the body a webhook carries, formatted otherwise). A page is one
transaction: a failure later in the run leaves the pages before it stored.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from hookinbox._errors import PayloadError
from hookinbox._metrics import count_reconciled
from hookinbox._model import NewDelivery
from hookinbox.sources._provider_api import Listed, ProviderAPIError

if TYPE_CHECKING:
    from hookinbox._storage import Store
    from hookinbox.sources._base import Source
    from hookinbox.sources._provider_api import Listing

Takes = Callable[[str | None], bool]
"""Whether some handler takes events of this type (from this source)."""


@dataclass
class Reconciled:
    """What one run found and did."""

    source: str
    since: datetime
    clamped: bool
    """`since` was further back than the provider's API lists, and was moved to its window."""
    listed: int = 0
    already_stored: int = 0
    missing: int = 0
    stored: int = 0
    skipped_types: int = 0
    redelivery_requested: int = 0
    """Missing events the provider was asked to deliver again (GitHub)."""

    def counts(self) -> dict[str, int]:
        return {
            "listed": self.listed,
            "already_stored": self.already_stored,
            "missing": self.missing,
            "stored": self.stored,
            "skipped_types": self.skipped_types,
            "redelivery_requested": self.redelivery_requested,
        }


def window_start(now: datetime, since: timedelta, window: timedelta) -> tuple[datetime, bool]:
    """Where the listing starts, and whether `since` was clamped to the provider's window."""
    if since > window:
        return now - window, True
    return now - since, False


def reconcile(
    store: Store,
    source: Source,
    listing: Listing,
    *,
    since: timedelta,
    now: datetime,
    takes: Takes,
    dry_run: bool = False,
) -> Reconciled:
    """List `source`'s events created since `now - since` and store the missing ones."""
    start, clamped = window_start(now, since, listing.window)
    result = Reconciled(source.name, start, clamped)
    for page in listing.pages(start):
        result.listed += len(page)
        wanted: list[tuple[Listed, NewDelivery]] = []
        for listed in page:
            event = _event(source, listed, now)
            if takes(event.event_type):
                wanted.append((listed, event))
            else:
                result.skipped_types += 1
        before = result.stored + result.redelivery_requested
        if listing.resends:
            _resend(store, source, listing, wanted, result, dry_run=dry_run)
        else:
            _store(store, source, [event for _, event in wanted], result, dry_run=dry_run)
        count_reconciled(source.name, result.stored + result.redelivery_requested - before)
    return result


def _store(
    store: Store, source: Source, wanted: list[NewDelivery], result: Reconciled, *, dry_run: bool
) -> None:
    """Store what is missing (Stripe): the insert decides what is."""
    if dry_run:
        stored_keys = store.ingest.stored_keys(source.name, [e.event_id for e in wanted])
        found = [e.event_id not in stored_keys for e in wanted]
    else:
        found = store.ingest.record_reconciled(wanted) if wanted else []
    new = sum(found)
    result.missing += new
    result.already_stored += len(found) - new
    if not dry_run:
        result.stored += new


def _resend(
    store: Store,
    source: Source,
    listing: Listing,
    wanted: list[tuple[Listed, NewDelivery]],
    result: Reconciled,
    *,
    dry_run: bool,
) -> None:
    """Ask for a redelivery of what is missing and failed (GitHub): it arrives signed."""
    stored_keys = store.ingest.stored_keys(source.name, [e.event_id for _, e in wanted])
    for listed, event in wanted:
        if event.event_id in stored_keys:
            result.already_stored += 1
            continue
        result.missing += 1
        if listed.resend is not None and not dry_run:
            listing.resend(listed)
            result.redelivery_requested += 1


def _event(source: Source, listed: Listed, now: datetime) -> NewDelivery:
    try:
        identity = source.identify(listed.headers, listed.body)
    except PayloadError as exc:
        raise ProviderAPIError(f"the API listed an event hookinbox cannot read: {exc}") from exc
    body = listed.body if identity.body is None else identity.body
    return NewDelivery(
        source=source.name,
        event_id=identity.event_id,
        event_type=identity.event_type,
        occurred_at=identity.occurred_at,
        received_at=now,
        body=body,
        headers={},
        body_sha256=hashlib.sha256(body).hexdigest(),
    )
