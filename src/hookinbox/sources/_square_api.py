"""Square's events, searched from its API (`POST /v2/events`) for `hookinbox reconcile`.

Square keeps events for 28 days and answers a search with at most 100 a page, newest first
when asked (`sort: {field: DEFAULT, order: DESC}`), filtered here by `created_at.start_at`
only, the next page named by `cursor` until an answer has none (a cursor given twice stops
the run). The events are what a
webhook carries (`event_id`, `type`, `created_at`, `data`), so each is stored as the event a
webhook of it would have stored, under its `event_id`; one without its `created_at` is no
event as Square lists them, marked and never stored.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import httpx

from hookinbox.sources._identity import parse_time
from hookinbox.sources._provider_api import (
    NOT_EVENT,
    READ_TIMEOUT,
    Budget,
    Listed,
    ProviderAPIError,
    Sleep,
    call,
    check_page_size,
    json_object,
)

WINDOW = timedelta(days=28)
PAGE_SIZE = 100
WHAT = "Square's API"
API_VERSION = "2025-10-16"


class SquareEvents:
    """The `Listing` of a `Square(access_token=...)` source."""

    window = WINDOW
    resends = False

    def __init__(self, *, access_token: str, api_base: str, sleep: Sleep | None = None) -> None:
        self._access_token = access_token
        self.api_base = api_base
        self._sleep = sleep

    def __repr__(self) -> str:  # never the token
        return f"SquareEvents(api_base={self.api_base!r})"

    def pages(self, since: datetime, budget: Budget) -> Iterator[list[Listed]]:
        headers = {
            "authorization": f"Bearer {self._access_token}",
            "accept": "application/json",
            "square-version": API_VERSION,
        }
        search: dict[str, Any] = {
            "limit": PAGE_SIZE,
            "query": {
                "filter": {"created_at": {"start_at": since.isoformat()}},
                "sort": {"field": "DEFAULT", "order": "DESC"},
            },
        }
        pager = budget.pager(WHAT)
        pager.next_page()
        with httpx.Client(headers=headers, timeout=READ_TIMEOUT) as client:
            while True:
                url = f"{self.api_base}/v2/events"
                sleep = self._sleep or time.sleep
                answer = call(client, "POST", url, body=search, what=WHAT, budget=budget,
                              sleep=sleep)  # fmt: skip
                page = json_object(answer, WHAT)
                events = page.get("events", [])
                if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
                    raise ProviderAPIError(f"{WHAT} answered a search without its events")
                check_page_size(events, PAGE_SIZE, WHAT)
                yield [_listed(event) for event in events]
                cursor = page.get("cursor")
                if not isinstance(cursor, str) or not cursor or not events:
                    return
                pager.next_page(cursor)
                search = {**search, "cursor": cursor}

    def resend(self, listed: Listed, budget: Budget) -> None:
        raise NotImplementedError("Square's listed events are stored, not resent")


def _listed(event: dict[str, Any]) -> Listed:
    """An event as listed; one without its time is no event as Square lists them."""
    at = parse_time(event.get("created_at")) if isinstance(event.get("created_at"), str) else None
    return Listed(json.dumps(event).encode(), at=at, skip=NOT_EVENT if at is None else None)
