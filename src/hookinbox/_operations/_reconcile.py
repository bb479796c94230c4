"""Reconcile: store the events a provider's API lists that no webhook delivered, or ask the
provider to deliver them again where its API lists deliveries without their events (GitHub:
nothing unsigned is stored; the redelivery is verified as usual).

Each listed event is counted once, in this order: what the run did not ask for is skipped
and counted by why (`skipped_outside_window`: dated before the window asked or later than
now; `skipped_other_accounts`; `skipped_not_events`: not an event, or one `identify` cannot
read; `skipped_bad_ids`: an id that is no id, never sent); a type no handler takes is
`skipped_types` (never stored); one already in the inbox is `already_stored` (also when a
webhook stored it a moment before our insert: the insert decides, `Ingest.record_reconciled`);
the rest are `missing`, and `stored` when this run stored them (none with `dry_run`). It is
stored under the key a webhook of it would have had: the source's own `identify`, on the
event's JSON as the API gives it (the body a webhook carries, formatted otherwise). A page is
one transaction: a failure later in the run (the API's, or a limit of `Limits`) leaves the
pages before it stored, and says so in its message.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from hookinbox._errors import PayloadError
from hookinbox._metrics import count_reconciled
from hookinbox._model import NewDelivery
from hookinbox.sources._provider_api import (
    BAD_ID,
    NOT_EVENT,
    OTHER_ACCOUNT,
    Budget,
    Limits,
    Listed,
    ProviderAPIError,
)

if TYPE_CHECKING:
    from hookinbox.sources._base import Source
    from hookinbox.sources._provider_api import Listing

Takes = Callable[[str | None], bool]
"""Whether some handler takes events of this type (from this source)."""


class Ledger(Protocol):
    """Where reconcile finds and stores events: a store's ingest gateway (`Ingest`), handed
    over by the operations service, which chooses the store."""

    def stored_keys(self, source: str, event_ids: Sequence[str]) -> set[str]: ...

    def record_reconciled(self, events_found: Sequence[NewDelivery]) -> list[bool]: ...


FUTURE_SKEW = timedelta(minutes=5)
"""How far past our clock an event may be dated and still be in the window: the provider's
clock and ours may differ by that much."""
OUTSIDE_WINDOW = "outside_window"
SKIPPED = {
    OUTSIDE_WINDOW: "outside the window",
    OTHER_ACCOUNT: "of another account",
    NOT_EVENT: "not an event",
    BAD_ID: "with an id that is no id",
}
"""Why a listed item was skipped, as a warning names it."""


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
    skipped_outside_window: int = 0
    skipped_other_accounts: int = 0
    skipped_not_events: int = 0
    skipped_bad_ids: int = 0
    pages: int = 0

    def counts(self) -> dict[str, int]:
        return {
            "listed": self.listed,
            "already_stored": self.already_stored,
            "missing": self.missing,
            "stored": self.stored,
            "skipped_types": self.skipped_types,
            "redelivery_requested": self.redelivery_requested,
            **self.unasked(),
        }

    def shown(self) -> dict[str, int]:
        """The counts a line of text shows: every one, but a skip that did not happen (what
        the API listed that was not asked for is rare, and --json has every count)."""
        unseen = {name for name, count in self.unasked().items() if not count}
        return {name: count for name, count in self.counts().items() if name not in unseen}

    def unasked(self) -> dict[str, int]:
        """The listed items the run did not ask for, by why they were skipped."""
        return {
            "skipped_outside_window": self.skipped_outside_window,
            "skipped_other_accounts": self.skipped_other_accounts,
            "skipped_not_events": self.skipped_not_events,
            "skipped_bad_ids": self.skipped_bad_ids,
        }

    def unasked_summary(self) -> str | None:
        """One sentence on what the API listed that was not asked for; None when nothing."""
        counts = self.unasked()
        parts = [f"{counts[name]} {SKIPPED[reason]}" for reason, name in _COUNTER.items()
                 if counts[name]]  # fmt: skip
        if not parts:
            return None
        return (f"the API listed {sum(counts.values())} item(s) that were not asked for "
                f"({', '.join(parts)}): skipped, not stored")  # fmt: skip

    def skip(self, reason: str) -> None:
        name = _COUNTER[reason]
        setattr(self, name, getattr(self, name) + 1)

    def stopped(self, error: ProviderAPIError, *, resends: bool) -> ProviderAPIError:
        """`error`, saying what the pages before it did: that stands."""
        pages = "1 page" if self.pages == 1 else f"{self.pages} pages"
        if resends:
            done = f"the redeliveries they asked for stand ({self.redelivery_requested} asked)"
        else:
            done = f"what they stored stays stored ({self.stored} stored)"
        return type(error)(f"{error}; stopped after {pages}: {done}")


_COUNTER = {
    OUTSIDE_WINDOW: "skipped_outside_window",
    OTHER_ACCOUNT: "skipped_other_accounts",
    NOT_EVENT: "skipped_not_events",
    BAD_ID: "skipped_bad_ids",
}
"""Each reason to skip a listed item, and the count of `Reconciled` it adds to."""


def window_start(now: datetime, since: timedelta, window: timedelta) -> tuple[datetime, bool]:
    """Where the listing starts, and whether `since` was clamped to the provider's window."""
    if since > window:
        return now - window, True
    return now - since, False


def reconcile(
    ledger: Ledger,
    source: Source,
    listing: Listing,
    *,
    since: timedelta,
    now: datetime,
    takes: Takes,
    dry_run: bool = False,
    limits: Limits | None = None,
    stop: threading.Event | None = None,
) -> Reconciled:
    """List `source`'s events created since `now - since` and store the missing ones, within
    `limits` (until `stop` is set: the worker's shutdown)."""
    start, clamped = window_start(now, since, listing.window)
    result = Reconciled(source.name, start, clamped)
    budget = Budget(limits, stop=stop)
    # The provider lists from `created[gte]` in whole seconds: a second's slack below.
    earliest, latest = start - timedelta(seconds=1), now + FUTURE_SKEW
    try:
        for page in listing.pages(start, budget):
            result.pages += 1
            result.listed += len(page)
            wanted: list[tuple[Listed, NewDelivery]] = []
            for listed in page:
                reason = listed.skip
                if reason is None and (listed.at is None or not earliest <= listed.at <= latest):
                    reason = OUTSIDE_WINDOW
                event = None if reason is not None else _event(source, listed, now)
                if event is None:
                    result.skip(reason or NOT_EVENT)
                elif takes(event.event_type):
                    wanted.append((listed, event))
                else:
                    result.skipped_types += 1
            before = result.stored + result.redelivery_requested
            if listing.resends:
                _resend(ledger, source, listing, wanted, result, budget, dry_run=dry_run)
            else:
                _store(ledger, source, [event for _, event in wanted], result, dry_run=dry_run)
            count_reconciled(source.name, result.stored + result.redelivery_requested - before)
    except ProviderAPIError as error:
        if not result.pages:
            raise
        raise result.stopped(error, resends=listing.resends) from error
    return result


def _store(
    ledger: Ledger, source: Source, wanted: list[NewDelivery], result: Reconciled, *, dry_run: bool
) -> None:
    """Store what is missing (Stripe): the insert decides what is."""
    if dry_run:
        stored_keys = ledger.stored_keys(source.name, [e.event_id for e in wanted])
        found = [e.event_id not in stored_keys for e in wanted]
    else:
        found = ledger.record_reconciled(wanted) if wanted else []
    new = sum(found)
    result.missing += new
    result.already_stored += len(found) - new
    if not dry_run:
        result.stored += new


def _resend(
    ledger: Ledger,
    source: Source,
    listing: Listing,
    wanted: list[tuple[Listed, NewDelivery]],
    result: Reconciled,
    budget: Budget,
    *,
    dry_run: bool,
) -> None:
    """Ask for a redelivery of what is missing and failed (GitHub): it arrives signed."""
    stored_keys = ledger.stored_keys(source.name, [e.event_id for _, e in wanted])
    for listed, event in wanted:
        if event.event_id in stored_keys:
            result.already_stored += 1
            continue
        result.missing += 1
        if listed.resend is not None and not dry_run:
            listing.resend(listed, budget)
            result.redelivery_requested += 1


def _event(source: Source, listed: Listed, now: datetime) -> NewDelivery | None:
    """The event as a webhook of it would be stored; None when `identify` cannot read it."""
    try:
        identity = source.identify(listed.headers, listed.body)
    except PayloadError:
        return None
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
