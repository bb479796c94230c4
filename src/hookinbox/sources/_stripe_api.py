"""Stripe's events, listed from its API (`GET /v1/events`) for `hookinbox reconcile`.

Stripe keeps events for 30 days and lists them newest first, at most 100 a page: the first
request names `created[gte]`, each next one also `starting_after` (the last id of the page
before) while `has_more` is true, each `starting_after` new to the run (a cursor that does not
move stops it). No other filter is sent, so every event the account sent in the window is seen
and counted; what the listing did not ask for is marked (`Listed.skip`), counted and never
stored: an object that is no `event`, one without its time, another account's (a Connect
account's event names its `account`; this listing is the platform account's own). httpx rather
than the `stripe` SDK: one GET is all reconcile needs, httpx is what hookinbox's other API
calls use already (the `http` extra), and the SDK would add a second HTTP stack, its own
retries (we honour `Retry-After` ourselves) and a global configuration to an application that
may use another version of it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import httpx

from hookinbox.sources._identity import parse_time
from hookinbox.sources._provider_api import (
    NOT_EVENT,
    OTHER_ACCOUNT,
    READ_TIMEOUT,
    Budget,
    Listed,
    ProviderAPIError,
    Sleep,
    check_page_size,
    get_json,
)

WINDOW = timedelta(days=30)
PAGE_SIZE = 100
WHAT = "Stripe's API"


class StripeEvents:
    """The `Listing` of a `Stripe(api_key=...)` source."""

    window = WINDOW
    resends = False

    def __init__(self, *, api_key: str, api_base: str, sleep: Sleep | None = None) -> None:
        self._api_key = api_key
        self.api_base = api_base
        self._sleep = sleep

    def __repr__(self) -> str:  # never the key
        return f"StripeEvents(api_base={self.api_base!r})"

    def pages(self, since: datetime, budget: Budget) -> Iterator[list[Listed]]:
        params: dict[str, Any] = {"created[gte]": int(since.timestamp()), "limit": PAGE_SIZE}
        headers = {"authorization": f"Bearer {self._api_key}", "accept": "application/json"}
        extra = {} if self._sleep is None else {"sleep": self._sleep}
        pager = budget.pager(WHAT)
        pager.next_page()
        with httpx.Client(headers=headers, timeout=READ_TIMEOUT) as client:
            while True:
                page = get_json(client, f"{self.api_base}/v1/events", params=params, what=WHAT,
                                budget=budget, **extra)  # fmt: skip
                data = page.get("data")
                if not isinstance(data, list) or not all(isinstance(e, dict) for e in data):
                    raise ProviderAPIError(f"{WHAT} answered a list without its data")
                check_page_size(data, PAGE_SIZE, WHAT)
                yield [_listed(event) for event in data]
                if not page.get("has_more") or not data:
                    return
                last = data[-1].get("id")
                if not isinstance(last, str) or not last:
                    raise ProviderAPIError(f"{WHAT} listed an event without an id")
                pager.next_page(last)
                params = {**params, "starting_after": last}

    def resend(self, listed: Listed, budget: Budget) -> None:
        raise NotImplementedError("Stripe's listed events are stored, not resent")


def _listed(event: dict[str, Any]) -> Listed:
    """An event as listed, with why it is skipped, if it is: an object that is no event (a
    listing answers only events), or another account's (a Connect account's event names its
    account; the platform's own names none: this listing is the platform's)."""
    at = parse_time(event.get("created")) if isinstance(event.get("created"), int) else None
    skip = None
    if event.get("object") != "event" or at is None:
        skip = NOT_EVENT
    elif event.get("account") is not None:
        skip = OTHER_ACCOUNT
    return Listed(json.dumps(event).encode(), at=at, skip=skip)
